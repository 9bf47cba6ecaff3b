"""Live progress on a terminal (one redrawn status line, ≤ 4 redraws/s); one plain line per stage otherwise.

A terminal gets: stage, elapsed / planned, requests done, current rps, running p50/p95 TTFT, errors.
Anything else (a CI log, a pipe) gets only a line when each stage ends, so logs stay readable. No
dependency: an ANSI clear-line and a carriage return are all a one-line display needs.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import TextIO

from sloguard.bench.record import RequestRecord

REDRAW_S = 0.25
RATE_WINDOW_S = 5.0
RUNNING_SAMPLE = 2000  # running TTFT quantiles over the most recent requests


class Progress:
    """Show how the running stage goes; `stage_line` always prints (the plain per-stage record)."""

    def __init__(self, out: TextIO = sys.stderr, tty: bool | None = None) -> None:
        self.out = out
        self.tty = out.isatty() if tty is None else tty
        self._label = ""
        self._planned = ""
        self._t0 = 0.0
        self._drawn = 0.0
        self._done = 0
        self._errors = 0
        self._ends: deque[float] = deque()
        self._ttft: deque[float] = deque(maxlen=RUNNING_SAMPLE)

    def start(self, label: str, planned: str) -> None:
        """Begin showing a stage."""
        self._label, self._planned, self._t0 = label, planned, time.monotonic()
        self._done = self._errors = 0
        self._ends.clear()
        self._ttft.clear()

    def add(self, records: list[RequestRecord]) -> None:
        """Count finished requests and redraw when due."""
        now = time.monotonic()
        for r in records:
            self._done += 1
            self._errors += 0 if r.result.ok else 1
            self._ends.append(now)
            if r.result.ttft_s is not None:
                self._ttft.append(r.result.ttft_s)
        while self._ends and self._ends[0] < now - RATE_WINDOW_S:
            self._ends.popleft()
        if self.tty and now - self._drawn >= REDRAW_S:
            self._drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        window = min(RATE_WINDOW_S, max(now - self._t0, 1e-3))
        ttft = sorted(self._ttft)
        p50 = f"{ttft[len(ttft) // 2] * 1e3:.0f}" if ttft else "-"
        p95 = f"{ttft[min(len(ttft) - 1, int(0.95 * len(ttft)))] * 1e3:.0f}" if ttft else "-"
        line = (f"{self._label}  {now - self._t0:5.1f}s/{self._planned}  done {self._done}  "
                f"{len(self._ends) / window:6.1f} req/s  TTFT p50 {p50} p95 {p95} ms  errors {self._errors}")
        self.out.write("\r\x1b[2K" + line)
        self.out.flush()

    def stage_line(self, text: str) -> None:
        """Print one line for a finished stage (clearing the status line on a terminal)."""
        self.out.write(("\r\x1b[2K" if self.tty else "") + text + "\n")
        self.out.flush()

    def note(self, text: str) -> None:
        """Print a message line."""
        self.stage_line(text)
