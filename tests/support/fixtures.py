"""Where the captured engine /metrics fixtures live: $SLOGUARD_SHARED_DIR, ../shared, else the vendored copy."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def captured_metrics_dir() -> Path:
    """Return the directory of the captured fixtures; ../shared wins so newly shared captures are tested too."""
    env = os.environ.get("SLOGUARD_SHARED_DIR")
    for base in ([Path(env)] if env else []) + [REPO / ".." / "shared"]:
        path = (base / "fixtures" / "metrics").resolve()
        if path.is_dir():
            return path
    return REPO / "tests" / "fixtures" / "metrics" / "captured"
