"""Pure exposition of probe results: cumulative `sloguard_probe_*` histograms and counters, with exemplars."""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.metrics_core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Exemplar

from sloguard.censoring import censored_metrics
from sloguard.families import declare
from sloguard.model import ProbeResult
from sloguard.outcome import outcome
from sloguard.probes.timing import ITL_BUCKETS
from sloguard.untrusted import MAX_TOKENS

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0,
                   3.0, 5.0, 7.5, 10.0, 20.0, 30.0, 60.0)
TOKEN_BUCKETS = ITL_BUCKETS

# metric name suffix -> (ProbeResult field, buckets, help); "itl" adds the request's per-token bucket counts
HISTOGRAMS: dict[str, tuple[str, tuple[float, ...], str]] = {
    "ttft": ("ttft_s", LATENCY_BUCKETS, "Probe time to first token (content or reasoning), from t0."),
    "ttfot": ("ttfot_s", LATENCY_BUCKETS, "Probe time to first non-reasoning output token, from t0."),
    "itl": ("itl_counts", TOKEN_BUCKETS, "Probe per-token inter-token latency (gap / tokens in the event)."),
    "tpot": ("tpot_s", TOKEN_BUCKETS, "Probe time per output token: (E2E - TTFT) / (usage tokens - 1)."),
    "e2e": ("e2e_s", LATENCY_BUCKETS, "Probe end-to-end latency: t0 to the last token-bearing event."),
    "connect": ("connect_s", LATENCY_BUCKETS, "Probe TCP/TLS connection set-up (0 on a reused connection)."),
}
HIST_LABELS = ("probe", "target", "model", "prompt_bucket")
HIST_FAMILIES = {name: declare(f"sloguard_probe_{name}_seconds", "histogram", doc, HIST_LABELS)
                 for name, (_, _, doc) in HISTOGRAMS.items()}
REQUESTS = declare("sloguard_probe_requests", "counter", "Probe requests by outcome.", ("probe", "target", "outcome"))
TOKENS = {kind: declare(f"sloguard_probe_{kind}_tokens", "counter",
                        f"Probe {kind} tokens as reported by the server's usage.", ("probe", "target"))
          for kind in ("output", "prompt")}
LAST_SUCCESS = declare("sloguard_probe_last_success_timestamp_seconds", "gauge",
                       "Unix time of the probe's last successful request.", ("probe",))
SUCCESS_AGE = declare("sloguard_probe_last_success_age_seconds", "gauge",
                      "Seconds since the last success, or since the probe's first recorded request (else the daemon "
                      "start) if none; kept across restarts from the store; computed at evaluation time.", ("probe",))
OVERHEAD = declare("sloguard_probe_timing_overhead_seconds", "gauge",
                   "Probe process timing error bar: the p99 wait a socket read has before the probe loop reads it "
                   "(time-weighted over every busy period of the loop in the last minute) plus clock read cost; "
                   "arrivals with a kernel receive stamp (Linux, plain HTTP) are not subject to it, sends are.")
STALL = declare("sloguard_probe_loop_stall_max_seconds", "gauge",
                "Longest time the probe process's loop ran without polling its sockets in the last minute "
                "(a read arriving then is stamped that late unless the kernel stamped it).")


@dataclass
class _Hist:
    counts: list[int]
    total: float = 0.0
    exemplars: dict[int, Exemplar] = field(default_factory=dict)

    def censor(self, bound: float) -> None:
        """Count a request that ended before the event, at more than `bound` s: +Inf bucket, bound into _sum."""
        self.counts[-1] += 1
        self.total += bound

    def observe(self, bounds: tuple[float, ...], value: float, trace_id: str, ts: float) -> None:
        i = bisect_left(bounds, value)  # le is inclusive: value == bound falls in that bucket
        self.counts[i] += 1
        self.total += value
        if trace_id:
            self.exemplars[i] = Exemplar({"trace_id": trace_id}, value, ts)

    def add_counts(self, counts: tuple[int, ...], total: float) -> None:
        """Add one request's per-bucket counts (a per-token histogram computed in the probe process)."""
        for i, n in enumerate(counts[: len(self.counts)]):
            self.counts[i] += n
        self.total += total


class ProbeMetrics:
    """Accumulate every result seen by this daemon instance into cumulative families (not thread-safe)."""

    def __init__(self, start: float | None = None) -> None:
        self._start = time.time() if start is None else start
        self._hists: dict[str, dict[tuple[str, ...], _Hist]] = {name: {} for name in HISTOGRAMS}
        self._requests: dict[tuple[str, str, str], int] = {}
        self._tokens: dict[str, dict[tuple[str, str], int]] = {"output": {}, "prompt": {}}
        self._last_success: dict[str, float] = {}
        self._probes: set[str] = set()
        self._configured: frozenset[str] | None = None  # None until expect(): accept every probe
        self._overhead: float | None = None
        self._stall: float | None = None
        self._first: dict[str, float] = {}  # probe -> first request known (restored), the age's origin

    def expect(self, probes: Iterable[str]) -> None:
        """Declare the configured probes (replacing the previous set, e.g. on reload).

        Their last-success age exists before any result arrives; every series of a probe no longer
        configured is dropped, and late results from it are ignored, so no stale-probe alert fires forever.
        """
        keep = frozenset(probes)
        self._configured = keep
        self._probes = set(keep)
        for rows in self._hists.values():
            for key in [k for k in rows if k[0] not in keep]:
                del rows[key]
        self._requests = {k: n for k, n in self._requests.items() if k[0] in keep}
        for kind, counts in self._tokens.items():
            self._tokens[kind] = {k: n for k, n in counts.items() if k[0] in keep}
        self._last_success = {p: t for p, t in self._last_success.items() if p in keep}

    def restore(self, baselines: Mapping[str, tuple[float, float | None]]) -> None:
        """Adopt what the store knows from before a restart: {probe: (first request ts, last success end)}.

        The last-success age then continues across a restart instead of restarting at 0 (which resolved
        and re-fired a staleness alert on every restart); a probe that never succeeded ages from its first
        recorded request, not from this process's start.
        """
        for probe, (first, last) in baselines.items():
            if self._configured is not None and probe not in self._configured:
                continue
            self._first[probe] = min(first, self._first.get(probe, first))
            if last is not None:
                self._last_success[probe] = max(last, self._last_success.get(probe, last))

    def set_overhead(self, seconds: float, stall: float | None = None) -> None:
        """Record the probe process's measured timing overhead and longest loop stall (ProbeWorker)."""
        self._overhead = seconds
        self._stall = stall

    def observe(self, r: ProbeResult) -> None:
        """Count one result; observe its defined latencies into the histograms (unless its probe was removed)."""
        if self._configured is not None and r.probe not in self._configured:
            return
        self._probes.add(r.probe)
        key = (r.probe, r.target, outcome(r))
        self._requests[key] = self._requests.get(key, 0) + 1
        for kind, count in (("output", r.output_tokens), ("prompt", r.prompt_tokens)):
            if isinstance(count, int) and 0 < count <= MAX_TOKENS:  # a counter never goes down or NaN
                tk = (r.probe, r.target)
                self._tokens[kind][tk] = self._tokens[kind].get(tk, 0) + count
        if r.ok:
            done = r.ts + (r.e2e_s or 0.0)  # ts is when the request started; success is when it ended
            self._last_success[r.probe] = max(done, self._last_success.get(r.probe, 0.0))
            self._observe_latencies(r)
        else:
            self._observe_failed(r)

    def _observe_failed(self, r: ProbeResult) -> None:
        """Observe what a failed request reached; count it in +Inf where it ended before the metric's event.

        Same rules as the SLO windows (sloguard.censoring.CENSORING): histogram_quantile then reads a
        quantile that falls among such requests as the top finite bucket bound, never as a fast value.
        """
        labels = (r.probe, r.target, r.model, r.prompt_bucket)
        cut = censored_metrics(r)
        for name, (attr, bounds, _) in HISTOGRAMS.items():
            value = getattr(r, attr)
            reached = value is not None and value != () and name not in cut
            if not reached and name not in cut:
                continue
            h = self._hists[name].setdefault(labels, _Hist([0] * (len(bounds) + 1)))
            if name == "itl" and r.itl_counts:  # the gaps it saw are real gaps
                h.add_counts(r.itl_counts, r.itl_sum_s)
            elif reached:
                h.observe(bounds, value, r.trace_id, r.ts)
            if name in cut:
                h.censor(cut[name])

    def _observe_latencies(self, r: ProbeResult) -> None:
        labels = (r.probe, r.target, r.model, r.prompt_bucket)
        for name, (attr, bounds, _) in HISTOGRAMS.items():
            value = getattr(r, attr)
            if value is None or value == ():  # undefined, or a request without per-token gaps
                continue
            h = self._hists[name].setdefault(labels, _Hist([0] * (len(bounds) + 1)))
            if name != "itl":
                h.observe(bounds, value, r.trace_id, r.ts)
                continue
            h.add_counts(r.itl_counts, r.itl_sum_s)
            for v in (r.itl_p50_s, r.itl_p99_s, r.itl_max_s):  # exemplars: exact per-token values of this request
                if v is not None and r.trace_id:
                    h.exemplars[bisect_left(bounds, v)] = Exemplar({"trace_id": r.trace_id}, v, r.ts)

    def families(self, now: float) -> list[Metric]:
        """Return all probe families; histograms carry {trace_id} exemplars (shown by OpenMetrics only)."""
        out: list[Metric] = [self._histogram(name) for name in HISTOGRAMS]
        out.extend(self._counters())
        out.extend(self._freshness(now))
        for fd, value in ((OVERHEAD, self._overhead), (STALL, self._stall)):
            if value is not None:
                out.append(GaugeMetricFamily(fd.name, fd.help, value=value))
        return out

    def _histogram(self, name: str) -> HistogramMetricFamily:
        bounds = HISTOGRAMS[name][1]
        fam = HIST_FAMILIES[name].histogram()
        for labels, h in sorted(self._hists[name].items()):
            cumulative, buckets = 0, list[tuple[str, float] | tuple[str, float, Exemplar]]()
            for i, le in enumerate((*bounds, math.inf)):
                cumulative += h.counts[i]
                ex = h.exemplars.get(i)
                buckets.append((_le(le), cumulative, ex) if ex else (_le(le), cumulative))
            fam.add_metric(list(labels), buckets, h.total)
        return fam

    def _counters(self) -> list[Metric]:
        req = REQUESTS.counter()
        for key, n in sorted(self._requests.items()):
            req.add_metric(list(key), n)
        out: list[Metric] = [req]
        for kind, rows in self._tokens.items():
            fam = TOKENS[kind].counter()
            for pair, n in sorted(rows.items()):
                fam.add_metric(list(pair), n)
            out.append(fam)
        return out

    def _freshness(self, now: float) -> list[Metric]:
        ts, age = LAST_SUCCESS.gauge(), SUCCESS_AGE.gauge()
        for probe in sorted(self._probes):
            last = self._last_success.get(probe)
            if last is not None:
                ts.add_metric([probe], last)
            origin = last if last is not None else min(self._start, self._first.get(probe, self._start))
            age.add_metric([probe], max(0.0, now - origin))
        return [ts, age]


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)
