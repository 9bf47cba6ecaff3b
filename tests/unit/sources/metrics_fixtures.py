"""Where the shared and own /metrics fixtures live (see support.fixtures for the search order)."""

from __future__ import annotations

from pathlib import Path

from support.fixtures import captured_metrics_dir

REPO = Path(__file__).resolve().parents[3]
SHARED = captured_metrics_dir()
OWN = REPO / "tests" / "fixtures" / "metrics"
FAMILY_LIST = SHARED / "vllm-v0.26.0-family-list.txt"


def exposition_files() -> list[Path]:
    """Return every exposition fixture (shared and own), not the family list."""
    files = sorted(SHARED.glob("*.txt")) + sorted(OWN.glob("*.txt"))
    return [f for f in files if f != FAMILY_LIST]
