"""A CPU-bound neighbour inside the simulator's process: the `cpu_burn` fault.

A thread burns `share` of one core in SLICE_S cycles, each burn one C-level call (`sum(range(n))`) that holds
the GIL for its whole length, as a tokenizer or detokenizer call on a serving process's hot path does. The
event loop, which serves HTTP, delivers tokens and steps the engine, waits for the GIL meanwhile, so every
part of the simulated server slows down through the same mechanism a real CPU-bound Python server suffers,
and the host source sees the process's CPU time rise.
"""

from __future__ import annotations

import threading
import time

SLICE_S = 0.1


def _calibrate() -> float:
    """Return seconds per element of sum(range(n)) on this machine (the best of a few short runs)."""
    n = 200_000
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        sum(range(n))
        best = min(best, time.perf_counter() - t0)
    return max(best / n, 1e-10)


class CPUBurner:
    """Start, retune and stop the burning thread; share 0 stops it."""

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self.share = 0.0
        # A model time like the engine's steps: `--time-scale` stretches it too (sim.server.make_simulator). At
        # time scale 2 an unscaled slice is half as long relative to the (doubled) steps, and the step loop makes
        # up much of each stall (scheduler.MAX_CARRY_S): a 0.9 burn raised TPOT ~1.3x there instead of ~2x.
        self.slice_s = slice_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._per_item = 0.0

    def set(self, share: float) -> None:
        """Burn `share` (0..1) of one core from now on; 0 stops the thread."""
        self.share = share
        if share <= 0.0:
            self.stop()
            return
        if self._thread is None or not self._thread.is_alive():
            self._per_item = self._per_item or _calibrate()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, name="sim-cpu-burn", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread (within one slice)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=1.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            share = self.share
            sum(range(max(1000, int(self.slice_s * share / self._per_item))))  # one GIL-holding call per slice
            self._stop.wait(self.slice_s * (1.0 - share))
