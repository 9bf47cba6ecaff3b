"""Run tests/support/gpu_load.py beside the code under test (without importing torch here)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOAD = Path(__file__).resolve().parent / "gpu_load.py"


@contextmanager
def colocated(kind: str, device: str = "cuda:0", out: str = "") -> Iterator[subprocess.Popen[str]]:
    """Start a gemm/copy/decode workload, wait until it is warm, stop it (SIGTERM, wait) when the block ends."""
    proc = subprocess.Popen([sys.executable, str(LOAD), "--kind", kind, "--device", device, "--out", out],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", f"{kind} load did not start"
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)
