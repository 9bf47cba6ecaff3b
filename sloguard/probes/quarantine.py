"""Targets whose answers flood are probed from a helper process, so they cannot slow the other targets' probes.

The CPU budget (sloguard.probes.budget) ends a flooding request after a burst of CPU; until then, and again on each
later request of that target, the probe process is busy parsing it. On a host short of CPU the kernel then schedules
the whole probe process like a CPU hog: its loop reads the other targets' sockets late, and a read that joins
several of their events stamps them all with the last one's arrival (benchmarks/hostile_streams.py, Part 1). So a
target with a request that ended as `event_flood` is handed to a helper process (started then, stopped once no
target is left in it), and comes back after RELEASE_AFTER results in a row without a flood (at once if the helper
dies, and floods then stay here for RETRY_S). The helper is the same probe runner (`python -m
sloguard.probes.worker helper ...`) over two pipes: its results, start and first-token messages are forwarded as
the probe process's own (its loop-lag reports are not: they are not the healthy loop's); it has no helper of its
own and exits when the probe process goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from sloguard.model import ProbeResult
from sloguard.outcome import EVENT_FLOOD, outcome
from sloguard.probes.job import ProbeJob
from sloguard.traces import ids

log = logging.getLogger("sloguard.probes")
RELEASE_AFTER = 10  # results in a row without a flood before a target is probed from the probe process again
RETRY_S = 60.0  # after a helper died, floods stay in the probe process this long (no crash loop of helpers)
HELPER = "helper"  # the worker's command-line argument that starts a helper
SPAN_KEY_ENV = "SLOGUARD_PROBE_SPAN_KEY"  # the probe span id key, so the helper's requests join their records too


class _Helper:
    """One helper process and the parent's ends of its two pipes."""

    def __init__(self) -> None:
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),  # import what this process does
               SPAN_KEY_ENV: ids.key().hex()}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sloguard.probes.worker", HELPER, str(cmd_r), str(res_w), str(os.getpid())],
                pass_fds=(cmd_r, res_w), env=env, stdin=subprocess.DEVNULL)
        finally:
            os.close(cmd_r)
            os.close(res_w)
        self.cmd, self.results = Connection(cmd_w, readable=False), Connection(res_r, writable=False)

    def send(self, message: tuple[str, Any]) -> None:
        with contextlib.suppress(OSError):
            self.cmd.send(message)

    def close(self) -> None:
        for conn in (self.cmd, self.results):
            conn.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(1.0)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Quarantine:
    """Which targets the helper probes; `split` sends it their jobs, `observe` moves targets in and out."""

    def __init__(self, forward: Callable[[tuple[str, Any]], None], changed: Callable[[], None]) -> None:
        self.targets: set[str] = set()
        self._forward, self._changed = forward, changed
        self._clean: dict[str, int] = {}  # quarantined target -> results in a row without a flood
        self._helper: _Helper | None = None
        self._retiring: list[_Helper] = []
        self._closing = False
        self._down_until = 0.0  # monotonic: no helper before this (the last one died)

    def split(self, jobs: Sequence[ProbeJob]) -> list[ProbeJob]:
        """Hand the quarantined targets' jobs to the helper (starting or stopping it); return the others."""
        away = tuple(j for j in jobs if j.target in self.targets)
        self.targets &= {j.target for j in away}
        if away and self._helper is None:
            try:
                self._helper = self._start()
            except OSError as exc:
                log.warning("cannot start the probe helper process (%s): flooding targets stay here", exc)
                self.targets.clear()
                self._down_until = time.monotonic() + RETRY_S
                return list(jobs)
        if self._helper is not None:
            self._helper.send(("jobs", away) if away else ("stop", None))
            if not away:
                self._retiring.append(self._helper)
                self._helper = None
        return [j for j in jobs if j.target not in self.targets]

    def observe(self, r: ProbeResult) -> bool:
        """Count one result; return True when its target moves into or out of the helper."""
        flood = outcome(r) == EVENT_FLOOD
        if r.target not in self.targets:
            if not flood or time.monotonic() < self._down_until:
                return False
            self.targets.add(r.target)
            self._clean[r.target] = 0
            log.warning("target %s answered with an event flood: probing it from a helper process", r.target)
            return True
        self._clean[r.target] = 0 if flood else self._clean.get(r.target, 0) + 1
        if self._clean[r.target] < RELEASE_AFTER:
            return False
        self.targets.discard(r.target)
        log.info("target %s answered %d times without a flood: probing it here again", r.target, RELEASE_AFTER)
        return True

    async def close(self, grace: float) -> None:
        """Stop the helpers, forwarding what they send until they exit (at most `grace` seconds)."""
        self._closing = True
        helpers = [h for h in (self._helper, *self._retiring) if h is not None]
        for h in helpers:
            h.send(("stop", None))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                while any(h.proc.poll() is None for h in helpers):
                    await asyncio.sleep(0.05)
        for h in helpers:
            self._read(h)
            if not h.results.closed:  # still running after the grace: stop it
                asyncio.get_running_loop().remove_reader(h.results.fileno())
                h.close()

    def _start(self) -> _Helper:
        helper = _Helper()
        asyncio.get_running_loop().add_reader(helper.results.fileno(), self._read, helper)
        return helper

    def _read(self, helper: _Helper) -> None:
        """Forward the helper's messages; on its exit, clean up (and take back its targets if it died)."""
        try:
            while not helper.results.closed and helper.results.poll():
                kind, value = helper.results.recv()
                if kind == "result" and self.observe(value):
                    self._changed()
                if kind != "overhead":  # the helper's loop lag is not the probe loop's
                    self._forward((kind, value))
            return
        except (EOFError, OSError):
            pass
        asyncio.get_running_loop().remove_reader(helper.results.fileno())
        helper.close()
        if helper in self._retiring:
            self._retiring.remove(helper)
        elif helper is self._helper and not self._closing:
            self._helper = None
            log.warning("probe helper process exited (%s): its targets are probed here again", helper.proc.returncode)
            self.targets.clear()
            self._down_until = time.monotonic() + RETRY_S
            self._changed()
