"""A bounded CPU hog: N processes each burning `share` of one core, for at most `seconds`, to load a host on purpose.

Each process spins on pure Python arithmetic (no syscalls) for `share` of every 10 ms and sleeps the rest, at the
default priority, so it competes with the code under test the way other work on a shared CI runner does. It
stops when its time is up, when the parent's `burning()` block ends, or when the parent dies (stdin closes).
Run as a script: `python tests/support/cpu_burner.py [--procs N] [--share 1.0] [--seconds 600]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PERIOD_S = 0.010
MAX_S = 3600.0  # a burner never outlives this, whatever it was asked


def burn(share: float, seconds: float) -> None:
    """Burn `share` (0..1] of one core in PERIOD_S cycles for `seconds` (this process)."""
    end = time.monotonic() + min(seconds, MAX_S)
    x = 0
    while (now := time.monotonic()) < end:
        spin_until = now + PERIOD_S * share
        while time.monotonic() < spin_until:
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        if share < 1.0:
            time.sleep(PERIOD_S * (1.0 - share))


@contextmanager
def burning(procs: int | None = None, share: float = 1.0, seconds: float = 600.0) -> Iterator[list[int]]:
    """Run `procs` burner processes (default: one per core) until the block ends; yield their pids."""
    n = procs if procs is not None else os.cpu_count() or 1
    args = [sys.executable, str(Path(__file__).resolve()), "--share", str(share), "--seconds", str(seconds),
            "--watch-stdin"]
    burners = [subprocess.Popen(args, stdin=subprocess.PIPE) for _ in range(n)]
    try:
        yield [p.pid for p in burners]
    finally:
        for p in burners:
            p.terminate()
        for p in burners:
            p.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--procs", type=int, default=1, help="processes to start (the script itself is one)")
    ap.add_argument("--share", type=float, default=1.0, help="share of one core each burns (0..1]")
    ap.add_argument("--seconds", type=float, default=600.0, help="stop after this long (at most 1 h)")
    ap.add_argument("--watch-stdin", action="store_true", help="stop when stdin closes (the parent went away)")
    args = ap.parse_args()
    if args.procs > 1:
        with burning(args.procs, args.share, args.seconds):
            time.sleep(min(args.seconds, MAX_S))
        return
    if args.watch_stdin:
        threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    burn(max(0.01, min(args.share, 1.0)), args.seconds)


if __name__ == "__main__":
    main()
