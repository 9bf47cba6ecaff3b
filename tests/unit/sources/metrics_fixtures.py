"""Where the shared and own /metrics fixtures live (shared/ beside the repo, or SLOGUARD_SHARED_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("SLOGUARD_SHARED_DIR") or (REPO / ".." / "shared")).resolve() / "fixtures" / "metrics"
OWN = REPO / "tests" / "fixtures" / "metrics"
FAMILY_LIST = SHARED / "vllm-v0.26.0-family-list.txt"


def exposition_files() -> list[Path]:
    """Return every exposition fixture (shared and own), not the family list."""
    files = sorted(SHARED.glob("*.txt")) + sorted(OWN.glob("*.txt"))
    return [f for f in files if f != FAMILY_LIST]
