"""Exposition of the guardrail checks' results (abort propagation, oversized prompts): `sloguard_check_*`.

Check results never enter SLO windows or the `sloguard_probe_*` families: a check is not a user request.
Per probe: outcomes counted, the last measured time (to release / to reject; for `leaked` and `hung` the
time waited, a lower bound) next to its bound, whether the last verdict passed, the HTTP status, and the
failed checks in a row, which the built-in alerts read. `error` (no verdict) leaves the run of failures as
it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric

from sloguard.families import declare
from sloguard.model import ProbeResult
from sloguard.probes.checks import FAILED, PASSED

LABELS = ("probe", "target", "check")
RUNS = declare("sloguard_check_runs", "counter", "Guardrail check runs by outcome (released, slow_release, leaked, "
               "rejected, slow_reject, accepted, truncated, hung, server_error, error).", (*LABELS, "outcome"))
GAUGES = {name: declare(f"sloguard_check_{suffix}", "gauge", doc, LABELS) for name, suffix, doc in (
    ("seconds", "seconds", "Last measured time: client disconnect to the engine releasing the request (abort), or "
     "send to answer (oversized_prompt); for leaked and hung the time waited."),
    ("bound", "bound_seconds", "The time the check allows (`within`)."),
    ("passed", "passed", "1 if the last verdict passed, 0 if it failed."),
    ("status", "status_code", "HTTP status of the last verdict's request."),
    ("failures", "consecutive_failures", "Failed verdicts in a row (0 after a pass); the built-in check alerts fire "
     "at 2."),
)}


@dataclass
class _Last:
    seconds: float | None = None
    passed: float | None = None
    status: int | None = None
    failures: int = 0


class CheckMetrics:
    """Accumulate check results per probe (not thread-safe: the daemon's loop only)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, str, str], int] = {}
        self._last: dict[tuple[str, str, str], _Last] = {}
        self._bounds: dict[str, float] = {}

    def expect(self, bounds: dict[str, float]) -> None:
        """Declare the configured check probes and their bounds; forget the series of removed ones."""
        self._bounds = dict(bounds)
        self._counts = {k: n for k, n in self._counts.items() if k[0] in bounds}
        self._last = {k: v for k, v in self._last.items() if k[0] in bounds}

    def observe(self, r: ProbeResult) -> None:
        """Count one check result (of a configured probe)."""
        if r.probe not in self._bounds:
            return
        key = (r.probe, r.target, r.check_kind)
        self._counts[(*key, r.check_outcome)] = self._counts.get((*key, r.check_outcome), 0) + 1
        last = self._last.setdefault(key, _Last())
        if r.check_outcome in PASSED | FAILED:
            last.seconds, last.status = r.check_s, r.status_code
            last.passed = 1.0 if r.check_outcome in PASSED else 0.0
            last.failures = 0 if r.check_outcome in PASSED else last.failures + 1

    def families(self) -> list[Metric]:
        """Return the `sloguard_check_*` families."""
        total = RUNS.counter()
        for counted, n in sorted(self._counts.items()):
            total.add_metric(list(counted), n)
        gauges = {name: fd.gauge() for name, fd in GAUGES.items()}
        for key, last in sorted(self._last.items()):
            for name, value in _values(last, self._bounds.get(key[0])):
                gauges[name].add_metric(list(key), value)
        return [total, *gauges.values()]


def _values(last: _Last, bound: float | None) -> Iterable[tuple[str, float]]:
    if last.seconds is not None:
        yield "seconds", last.seconds
    if bound:
        yield "bound", bound
    if last.passed is not None:
        yield "passed", last.passed
    if last.status is not None:
        yield "status", float(last.status)
    yield "failures", float(last.failures)
