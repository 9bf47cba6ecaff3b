"""Engine spans against the probe request they describe: within its lifetime, never longer than it.

The probe knows when it sent the request (`ProbeResult.ts`, wall clock) and how long it ran (`elapsed_s`,
monotonic). The engine served it inside that interval: its spans must lie within [ts − skew, ts + elapsed +
skew] (skew: how far the engine's wall clock may be from ours), and no stage it reports can be longer than
the whole request as the client saw it (durations do not depend on the clocks' offset; the slack, 50 ms + 5%,
covers rate drift, rounding and a busy engine stamping late: the check is for absurd values, not for precision).
What fails is dropped and counted, never joined.
"""

from __future__ import annotations

from collections.abc import Sequence

from sloguard.model import ProbeResult
from sloguard.traces.record import ServerRecord
from sloguard.traces.span import SpanData
from sloguard.untrusted import Invalid

SLACK_S, SLACK_RATIO = 0.05, 0.05
# The stages a record gives a result (its e2e is not one: an engine may stamp it after the last byte left).
_STAGES = ("ttft_s", "queue_s", "prefill_s", "decode_s")
SPAN_OVERHEAD = 400  # bytes of a held SpanData besides its strings (tuple, ids as text, dict)
ATTR_BYTES = 200  # a kept attribute: key, value (strings cut to 64 characters) and its dict slot


def span_bytes(span: SpanData) -> int:
    """Return an estimate of the memory one held span takes (what `traces.max_pending_bytes` counts)."""
    return SPAN_OVERHEAD + len(span.name) + ATTR_BYTES * len(span.attrs) + len(span.raw) + len(span.resource)


def _lasted(result: ProbeResult) -> float | None:
    return result.elapsed_s if result.elapsed_s is not None else result.e2e_s


def spans_within(result: ProbeResult, spans: Sequence[SpanData], skew: float) -> tuple[list[SpanData], int]:
    """Return the spans inside the request's lifetime ± skew and how many were outside it."""
    lasted = _lasted(result)
    if lasted is None or result.ts <= 0:  # a result that does not say when it ran (tests, old records)
        return list(spans), 0
    lo, hi = int((result.ts - skew) * 1e9), int((result.ts + lasted + skew) * 1e9)
    kept = [s for s in spans if lo <= s.start_ns and s.end_ns <= hi]
    return kept, len(spans) - len(kept)


def check_record(record: ServerRecord, result: ProbeResult) -> None:
    """Raise Invalid when a stage of the record is longer than the request it describes."""
    lasted = _lasted(result)
    if lasted is None:
        return
    bound = lasted * (1 + SLACK_RATIO) + SLACK_S
    for name in _STAGES:
        value = getattr(record, name)
        if value is not None and value > bound:
            raise Invalid("longer_than_request", f"{name} {value:.6g}s > the request's {lasted:.6g}s")
