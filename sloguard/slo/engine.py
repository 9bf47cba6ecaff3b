"""The stateful SLO holder the daemon owns: routes probe results into windows, evaluates, exports."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence
from typing import cast

from prometheus_client.metrics_core import Metric

from sloguard.censoring import encode
from sloguard.clock import Clock
from sloguard.model import ProbeResult
from sloguard.outcome import failure_kind
from sloguard.slo import export
from sloguard.slo.counters import CounterKey, ReplicaKey, ReplicaTotals, counter_key, server_counts
from sloguard.slo.evaluate import ServerWindowsLike, evaluate
from sloguard.slo.model import SLO, Indicator, indicators, is_good
from sloguard.slo.result import SLOStatus
from sloguard.windows.probe import ProbeWindow, judge

ALL = ""  # the all-requests segment
FAILURES_KEPT, FAILURES_MAX = 3600.0, 20_000  # what an availability breach's "why" can count: the last hour
def _judged(result: ProbeResult, ind: Indicator, good: bool, objectives: tuple[int, int, dict[Indicator, int]],
            ) -> bool | None:
    """Return whether a request was good for one budget, or None when the budget does not judge it."""
    if ind.sli == "availability":
        return result.ok
    if ind.metric is None:
        return good
    missed, judged, bits = objectives
    bit = bits[ind]
    return None if not judged & bit else not missed & bit


class SLOEngine:
    """Per-SLO probe windows and cumulative good/bad counters; not thread-safe (event loop only)."""

    def __init__(self, slos: Sequence[SLO], clock: Clock) -> None:
        self._clock = clock
        self._slos: tuple[SLO, ...] = ()
        self._windows: dict[str, dict[str, ProbeWindow]] = {}
        self._requests: dict[CounterKey, int] = {}
        self._replica_requests: dict[ReplicaKey, float] = {}  # server SLOs (sloguard.slo.counters)
        self._failures: dict[str, deque[tuple[float, str]]] = {}
        self.reconfigure(slos)

    @property
    def slos(self) -> tuple[SLO, ...]:
        """Return the SLOs evaluated, in config order."""
        return self._slos

    def windows(self, slo: str) -> dict[str, ProbeWindow]:
        """Return an SLO's probe windows by segment ("" = all requests)."""
        return self._windows[slo]

    def failures(self, slo: str, window: float, now: float) -> dict[str, int]:
        """Return the SLO's failed requests over the last `window` (≤ 1 h) by kind (timeout, HTTP 503, ...)."""
        got = Counter(kind for ts, kind in self._failures.get(slo, ()) if now - window < ts <= now)
        return dict(got.most_common())

    def add_probe_results(self, results: Iterable[ProbeResult]) -> None:
        """Record results in every probe SLO whose target (and probe, if set) match; count them."""
        self._add(results, count=True)

    def rebuild(self, results: Iterable[ProbeResult]) -> None:
        """Refill windows from stored results so a restart keeps the error budget; counters stay untouched.

        Streams `results` once without materialising them (pass `Store.iter_probe_results`); give them oldest
        first, as the store's ORDER BY ts does (out-of-order rows are still placed right, only slower).
        """
        self._add(results, count=False)

    def evaluate(self, now: float, server: ServerWindowsLike | None = None) -> list[SLOStatus]:
        """Return every SLO's status at `now`, forgetting what left the windows."""
        out = []
        for slo in self._slos:
            for pw in self._windows[slo.name].values():
                pw.expire(now)
            out.append(evaluate(slo, self._windows[slo.name], now, server))
        if server is not None and hasattr(server, "replica_totals"):  # the daemon's ServerWindows
            self._replica_requests = server_counts(self._slos, cast(ReplicaTotals, server))
        return out

    def families(self, statuses: Sequence[SLOStatus]) -> list[Metric]:
        """Return the sloguard_slo_* and sloguard_stage_* families for these statuses."""
        return export.families(statuses, self._requests, self._replica_requests)

    def api_json(self, statuses: Sequence[SLOStatus]) -> dict[str, object]:
        """Return the GET /api/v1/slos document."""
        return export.api_json(statuses)

    def reconfigure(self, slos: Sequence[SLO], history: Iterable[ProbeResult] | None = None) -> None:
        """Swap SLOs: those with an unchanged SLO.key keep their windows; new or changed ones are refilled.

        `history` (stored results, oldest first: `Store.iter_probe_results(now - longest window)`) refills
        the windows of new or changed probe SLOs, so a reload resets no budget; it is only read when one
        needs it. Without it they start empty. Counters of every SLO still configured are kept.
        """
        old = {s.name: s for s in self._slos}
        windows: dict[str, dict[str, ProbeWindow]] = {}
        fresh: set[str] = set()
        for slo in slos:
            kept = old.get(slo.name)
            if kept is not None and kept.key == slo.key:
                windows[slo.name] = self._windows[slo.name]
            else:
                windows[slo.name] = {ALL: ProbeWindow(slo.window, since=self._clock.now())}
                fresh.add(slo.name)
        # Both series of every probe SLO budget exist at 0 from the start, so rate() sees the first bad request.
        zero = {counter_key(s.name, ind, good): 0 for s in slos if s.source == "probe"
                for ind in indicators(s) for good in (False, True)}
        self._requests = {k: self._requests.get(k, 0) for k in zero}
        self._slos, self._windows = tuple(slos), windows
        self._failures = {n: f for n, f in self._failures.items() if n in windows and n not in fresh}
        if history is not None and any(s.source == "probe" and s.name in fresh for s in slos):
            self._add(history, count=False, only=fresh)

    def _add(self, results: Iterable[ProbeResult], count: bool, only: set[str] | None = None) -> None:
        probe_slos = [s for s in self._slos if s.source == "probe" and (only is None or s.name in only)]
        plans = {s.name: _plan(s) for s in probe_slos}
        for r in results:
            encoded = encode(r)
            for slo in probe_slos:
                if r.target != slo.target or (slo.probe is not None and r.probe != slo.probe):
                    continue
                budgets, objectives, bits = plans[slo.name]
                good = is_good(r, slo.goodput)
                missed, judged = judge(r, objectives, encoded)
                segments = self._windows[slo.name]
                segments[ALL].add(r, good, missed, encoded)
                if not r.ok:
                    self._fail(slo.name, r)
                if slo.segment_by == "prompt_bucket":
                    segments.setdefault(r.prompt_bucket, ProbeWindow(slo.window)).add(r, good, missed, encoded)
                if count:
                    self._count(slo.name, budgets, r, good, (missed, judged, bits))

    def _fail(self, slo: str, r: ProbeResult) -> None:
        log = self._failures.setdefault(slo, deque(maxlen=FAILURES_MAX))
        log.append((r.ts, failure_kind(r)))
        while log and log[0][0] < log[-1][0] - FAILURES_KEPT:
            log.popleft()

    def _count(self, slo: str, budgets: tuple[Indicator, ...], r: ProbeResult, good: bool,
               objectives: tuple[int, int, dict[Indicator, int]]) -> None:
        for ind in budgets:
            verdict = _judged(r, ind, good, objectives)
            if verdict is not None:
                key = counter_key(slo, ind, verdict)
                self._requests[key] = self._requests.get(key, 0) + 1


def _plan(slo: SLO) -> tuple[tuple[Indicator, ...], tuple[tuple[str, float], ...], dict[Indicator, int]]:
    """Return what judging a request for an SLO needs: its budgets, objectives and each budget's miss bit."""
    budgets = indicators(slo)
    bits = {ind: 1 << i for i, o in enumerate(slo.objectives) for ind in budgets
            if (ind.metric, ind.percentile, ind.threshold) == (o.metric, o.percentile, o.threshold)}
    return budgets, tuple((o.metric, o.threshold) for o in slo.objectives), bits
