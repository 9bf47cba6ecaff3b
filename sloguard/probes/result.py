"""Pure: a probe request's stamped reads -> its ProbeResult (DESIGN.md §4), and the stamps they are timed from.

The first fault wins: transport, limits, an error event, truncation. The response head is a network time only when
the body did not follow it at once (DEFERRED_HEAD_S): a server that sends its head with its first output has none.
"""

from __future__ import annotations

from dataclasses import dataclass

from sloguard.model import ProbeResult
from sloguard.probes.events import INVALID, Decoder, Events
from sloguard.probes.faults import redact
from sloguard.probes.job import ProbeJob
from sloguard.probes.timing import Summary
from sloguard.probes.workload import Prompt
from sloguard.traces.record import record_fields


@dataclass(slots=True)
class Stamps:
    """Per-request stamps written by the trace hooks (perf_counter_ns)."""

    t0_ns: int = 0
    connect_start_ns: int = 0
    connect_end_ns: int = 0
    head_ns: int = 0  # arrival of the response head (status line and headers), from the arrival hook
    body_ns: int = 0  # arrival of the first body bytes


def assemble(
    job: ProbeJob,
    prompt: Prompt,
    trace_id: str,
    ts: float,
    status: int | None,
    stamps: Stamps,
    chunks: list[tuple[int, bytes]],
    decode: Decoder,
    done_on_eof: bool,
    error: str | None,
) -> ProbeResult:
    """Pure: stamped reads -> ProbeResult; the first fault wins: transport, limits, error event, truncation."""
    events = Events(decode, job.max_events)
    for t_ns, data in chunks:
        if error is None:
            error = events.feed_now(t_ns, data)
    summary = events.tally.summary(stamps.t0_ns, gaps=error is None)
    return build_result(job, prompt, trace_id, ts, status, stamps, events, summary, done_on_eof, error)


def build_result(
    job: ProbeJob, prompt: Prompt, trace_id: str, ts: float, status: int | None, stamps: Stamps,
    events: Events, summary: Summary, done_on_eof: bool, error: str | None, elapsed_s: float | None = None,
) -> ProbeResult:
    """Build the ProbeResult from the §4 summary (a failed request keeps the timings it reached)."""
    if error is None:
        error = _stream_error(summary, events.unfinished, done_on_eof)
    connect = (stamps.connect_end_ns - stamps.connect_start_ns) * 1e-9 if stamps.connect_start_ns else 0.0
    head = head_time(stamps)
    itl = summary.itl
    return ProbeResult(
        ts=ts, probe=job.name, target=job.target, model=job.model, api=job.api, ok=error is None,
        error=redact(error, job.api_key), status_code=status, connect_s=connect if status else None,
        ttft_s=summary.ttft_s, ttfot_s=summary.ttfot_s, e2e_s=summary.e2e_s, tpot_s=summary.tpot_s,
        itl_p50_s=itl.p50_s if itl else None, itl_p99_s=itl.p99_s if itl else None,
        itl_max_s=itl.max_s if itl else None,
        prompt_tokens=summary.prompt_tokens, output_tokens=summary.output_tokens,
        prompt_bucket=prompt.bucket, trace_id=trace_id, **record_fields(summary.record), elapsed_s=elapsed_s,
        itl_counts=itl.counts if itl else (), itl_sum_s=itl.sum_s if itl else 0.0, t0_ns=stamps.t0_ns,
        head_s=head if status else None, head_raw_s=raw_head(stamps) if status else None,
    )


DEFERRED_HEAD_S = 0.001  # a head followed by body bytes this soon was sent with the server's first output


def raw_head(stamps: Stamps) -> float | None:
    """Return t0 → response head, however soon the body followed (None when not stamped)."""
    if not stamps.head_ns or stamps.head_ns < stamps.t0_ns or stamps.t0_ns <= 0:
        return None
    return (stamps.head_ns - stamps.t0_ns) * 1e-9


def head_time(stamps: Stamps) -> float | None:
    """Return t0 → response head, the network stage without a server record; None if it is not one.

    A server that sends its head only with its first output (llama-server does: head 3.9 ms, first event
    0.6 ms later, after a 2.1 ms prefill) makes the head time a TTFT, not a network time: a head followed
    by the first body bytes within DEFERRED_HEAD_S gives no network stage.
    """
    if not stamps.head_ns or stamps.head_ns < stamps.t0_ns or stamps.t0_ns <= 0:
        return None
    if stamps.body_ns and stamps.body_ns - stamps.head_ns < DEFERRED_HEAD_S * 1e9:
        return None
    return (stamps.head_ns - stamps.t0_ns) * 1e-9


def _stream_error(summary: Summary, unfinished: bool, done_on_eof: bool) -> str | None:
    """A stream's own faults; an answer of only the end-of-sequence token (no text) is a success ("empty")."""
    if summary.error is not None:
        return summary.error if summary.error.startswith(INVALID) else f"error event: {summary.error}"
    if unfinished or not (summary.done or done_on_eof):
        return "truncated stream: ended before its terminator"
    if summary.token_events == 0:
        return "no tokens in stream"
    return None
