"""Exposition of the per-request records: measured stage histograms (`source="request"`) and join counters."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.metrics_core import Metric

from sloguard.families import FamilyDef, declare
from sloguard.model import ProbeResult
from sloguard.traces.record import STAGE_FIELDS

# Fine at the low end: a loopback network stage is ~1 ms and vLLM's queue often ~40 µs.
STAGE_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                 30.0)
STAGE_SECONDS = declare("sloguard_request_stage_seconds", "histogram", "Stage of each probe request measured from the "
                        "server's own record of it (network = client TTFT - server TTFT, queue, prefill, decode); "
                        "source=request.", ("probe", "target", "stage", "source"))
SPANS = declare("sloguard_trace_spans", "counter", "Spans received by the OTLP receiver, by what became of them.",
                ("outcome",))
RECEIVER = declare("sloguard_trace_receiver_requests", "counter", "OTLP export requests received, by outcome.",
                   ("outcome",))
RECORDS = declare("sloguard_request_records", "counter", "Successful probe requests by where their server record "
                  "came from (otlp, inband, or missing).", ("target", "source"))
NEGATIVE = declare("sloguard_request_stage_negative", "counter", "Measured stages dropped for being negative (a clock "
                   "or join bug, never exported as a stage).", ("target", "stage"))
EXPORT = declare("sloguard_trace_export_spans", "counter", "Probe client spans (and forwarded engine spans) by export "
                 "outcome.", ("outcome",))
PENDING = (declare("sloguard_trace_pending_results", "gauge", "Probe results waiting for their engine span."),
           declare("sloguard_trace_pending_spans", "gauge", "Engine spans waiting for their probe result."),
           declare("sloguard_trace_pending_span_bytes", "gauge", "Estimated bytes of the engine spans waiting for "
                   "their probe result (bounded by traces.max_pending_bytes per lane)."))


class StageHistograms:
    """Cumulative histograms of measured stages per probe and target (aggregatable across daemons)."""

    def __init__(self) -> None:
        self._h: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}

    def observe(self, results: Iterable[ProbeResult]) -> None:
        """Count each finalised result's measured stages."""
        for r in results:
            for attr, stage in STAGE_FIELDS.items():
                v = getattr(r, attr)
                if v is None:
                    continue
                counts, total = self._h.setdefault((r.probe, r.target, stage, "request"),
                                                   ([0] * (len(STAGE_BUCKETS) + 1), [0.0]))
                counts[bisect_left(STAGE_BUCKETS, v)] += 1
                total[0] += v

    def retain(self, probes: set[str]) -> None:
        """Forget the series of probes no longer configured."""
        self._h = {k: v for k, v in self._h.items() if k[0] in probes}

    def family(self) -> Metric:
        """Return `sloguard_request_stage_seconds`."""
        fam = STAGE_SECONDS.histogram()
        for key, (counts, total) in sorted(self._h.items()):
            cumulative, buckets = 0, []
            for bound, c in zip((*STAGE_BUCKETS, float("inf")), counts, strict=True):
                cumulative += c
                buckets.append(("+Inf" if bound == float("inf") else f"{bound:g}", cumulative))
            fam.add_metric(list(key), buckets, total[0])
        return fam


def _counter(fd: FamilyDef, values: Mapping[Any, int]) -> Metric:
    fam = fd.counter()
    for key, v in sorted(values.items()):
        fam.add_metric(list(key), v)
    return fam


def counters(spans: Mapping[str, int], receiver: Mapping[str, int], records: Mapping[tuple[str, str], int],
             negative: Mapping[tuple[str, str], int], export: Mapping[str, int]) -> list[Metric]:
    """Return the receiver, join, record and span-export counters."""
    return [
        _counter(SPANS, {(k,): v for k, v in spans.items()}),
        _counter(RECEIVER, {(k,): v for k, v in receiver.items()}),
        _counter(RECORDS, records),
        _counter(NEGATIVE, negative),
        _counter(EXPORT, {(k,): v for k, v in export.items()}),
    ]


def gauges(pending_results: int, pending_spans: int, pending_bytes: int) -> list[Metric]:
    """Return what the join holds right now."""
    out: list[Metric] = []
    for fd, value in zip(PENDING, (pending_results, pending_spans, pending_bytes), strict=True):
        g = fd.gauge()
        g.add_metric([], value)
        out.append(g)
    return out
