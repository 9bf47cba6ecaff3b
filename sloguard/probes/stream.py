"""The HTTP edge of every probe: send one streaming request, stamp each read, build the ProbeResult.

Timing: t0 is stamped by aiohttp's trace hooks when the connection is ready (`on_connection_create_end`
or `on_connection_reuseconn`), then moved to when the request's last write was handed to the kernel (seen
by the connection's write hook, `arrival`), so TTFT excludes TCP/TLS set-up (`connect_s`, 0 on a reused
connection) and the client's own request building. Each socket read is stamped on arrival (the kernel's
receive stamp on Linux, else in `data_received`), before aiohttp parses it and before any coroutine
resumes (see `arrival`, `rxstamp`); an event split across reads gets the stamp of the read that completed it.
Events are split and decoded as they arrive, in slices that yield to the loop (see `events`), never in one
block at the end of a stream.

Faults, each a failed request with its own message: redirects are never followed (`redirect 302 to URL`,
credentials and query removed), a 200 that is not `text/event-stream` is `not an event stream (TYPE)`, a
reset is `connection reset after N bytes`, a malformed chunk or head `protocol error: ...` at once, more
events than the probe's `max_events` or more CPU than its budget (`budget`) `event flood: ...`, an answer whose
last byte arrived after the deadline (`deadline`) `timeout after Ts`; the status code the server sent is kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import aiohttp

from sloguard.model import ProbeResult
from sloguard.probes import prefill
from sloguard.probes.arrival import Arrivals, Slicer, StampedResponse, capturing
from sloguard.probes.budget import CpuBudget
from sloguard.probes.connection import SETTLE_S, FreshConnector
from sloguard.probes.deadline import Deadline
from sloguard.probes.events import Decoder, Events, Sink
from sloguard.probes.faults import EVENT_STREAM, describe, head_error, reset_error, was_reset
from sloguard.probes.job import ProbeJob
from sloguard.probes.result import Stamps, assemble, build_result
from sloguard.probes.workload import Prompt, traceparent

log = logging.getLogger("sloguard.probes")

MAX_BODY_BYTES = 16 * 1024 * 1024
# aiohttp's buffer per response (default 64 KiB): it parses at most 1/16 as many HTTP chunks before it pauses, and a
# read of the body pops them in one step; 4,096 tiny chunks of a flood took 40 ms of CPU in one step, 256 take ~2 ms
READ_BUFSIZE = 4096
__all__ = ["EVENT_STREAM", "Decoder", "Events", "Fetched", "Stamps", "assemble", "fetch", "make_session", "run_stream"]


def _stamps(ctx: SimpleNamespace) -> Stamps | None:
    got = getattr(ctx, "trace_request_ctx", None)
    return got if isinstance(got, Stamps) else None


async def _on_create_start(_s: aiohttp.ClientSession, ctx: SimpleNamespace, _p: object) -> None:
    if (st := _stamps(ctx)) is not None:
        st.connect_start_ns = time.perf_counter_ns()


async def _on_connection_ready(_s: aiohttp.ClientSession, ctx: SimpleNamespace, _p: object) -> None:
    if (st := _stamps(ctx)) is not None:
        st.t0_ns = st.connect_end_ns = time.perf_counter_ns()


def make_session(settle_s: float = SETTLE_S) -> aiohttp.ClientSession:
    """Return the probe session: trace hooks for t0/connect, arrival-stamped bodies, no pool limit,
    and a pool that never hands out a connection the server already closed (nor one idle < `settle_s`)."""
    trace = aiohttp.TraceConfig()
    trace.on_connection_create_start.append(_on_create_start)
    trace.on_connection_create_end.append(_on_connection_ready)
    trace.on_connection_reuseconn.append(_on_connection_ready)
    return aiohttp.ClientSession(
        trace_configs=[trace], auto_decompress=False, connector=FreshConnector(limit=0, settle_s=settle_s),
        response_class=StampedResponse, read_bufsize=READ_BUFSIZE,
    )


@dataclass(slots=True)
class Fetched:
    """The raw outcome of one streaming request: status, stamps, stamped reads, transport error.

    `chunks` holds the stamped reads only when no sink consumed them. `late` counts reads the arrival hook
    did not see, stamped when the reader resumed instead (0 normally).
    """

    ts: float
    status: int | None
    stamps: Stamps
    chunks: list[tuple[int, bytes]]
    error: str | None
    late: int = 0


async def fetch(
    session: aiohttp.ClientSession, url: str, body: Mapping[str, Any], headers: Mapping[str, str],
    timeout: float, sink: Sink | None = None, budget: CpuBudget | None = None,
) -> Fetched:
    """POST and collect every read stamped on arrival, passing each to `sink`; never raises for faults.

    The timeout is a hard deadline from connect to last byte, judged on arrival (sloguard.probes.deadline): an
    answer whose last byte arrived in time is not a timeout however late the loop read it, one that arrived
    late is. On timeout or error the connection is closed, so the server sees the client go away and stops
    generating. Redirects are not followed. `budget` is charged for parsing this request's reads.
    """
    stamps, slicer = Stamps(), Slicer(())
    chunks: list[tuple[int, bytes]] | None = [] if sink is None else None
    ts, status, error = time.time(), None, None
    stamps.t0_ns = since_ns = time.perf_counter_ns()  # t0 fallback when the session has no trace hooks
    with capturing(budget) as cap:
        deadline = Deadline(timeout, lambda by_ns: cap.log is not None and cap.log.complete_by(since_ns, by_ns))
        try:
            async with deadline, session.post(url, json=body, headers=headers, trace_request_ctx=stamps,
                                              allow_redirects=False) as resp:
                status = resp.status
                stamps.head_ns = getattr(resp, "head_ns", 0)
                _to_written(stamps, cap.log)
                error = await head_error(resp)
                if error is None:
                    slicer = Slicer(resp.marks if isinstance(resp, StampedResponse) else ())
                    error = await _read(resp, slicer, chunks, sink)
                    stamps.body_ns = resp.marks[0][0] if isinstance(resp, StampedResponse) and resp.marks else 0
            if error is None and deadline.missed(_last_ns(resp)):
                raise TimeoutError
        except TimeoutError:
            error = f"timeout after {timeout:g}s"
        except (aiohttp.ClientError, OSError) as exc:
            error = describe(exc, cap.log)
        if error is None and was_reset(cap.log):  # a reset can end a close-delimited body like EOF
            error = reset_error(cap.log)
        if status is None and error is not None and cap.log is not None:
            status = cap.log.status  # aiohttp lost the head it parsed when later bytes were malformed
    return Fetched(ts, status, stamps, chunks or [], error, slicer.late)


def _last_ns(resp: aiohttp.ClientResponse) -> int:
    """Return the arrival stamp of a response's last byte read (0 when the arrival hook did not see it)."""
    if not isinstance(resp, StampedResponse):
        return 0
    return resp.marks[-1][0] if resp.marks else resp.head_ns


def _to_written(stamps: Stamps, log: Arrivals | None) -> None:
    """Move t0 to when the request was written, if that write was seen on this request's connection.

    On loopback the answer's head can arrive before the writing `send()` returns (the kernel runs the server's
    receive path inside it): the request was written by then, so t0 is the earlier of the two stamps.
    """
    sent = log.sent_ns if log is not None else 0
    if stamps.t0_ns <= sent:  # not the previous request's write on a kept-alive connection
        stamps.t0_ns = min(sent, stamps.head_ns) if stamps.head_ns else sent


async def run_stream(
    session: aiohttp.ClientSession,
    job: ProbeJob,
    prompt: Prompt,
    url: str,
    body: Mapping[str, Any],
    decode: Decoder,
    done_on_eof: bool = False,
) -> ProbeResult:
    """Send one streaming request for `job` with a fresh traceparent and measure it (§4 definitions)."""
    header, trace_id = traceparent()
    headers = {"traceparent": header, "Accept": EVENT_STREAM, "Accept-Encoding": "identity"}
    if job.api_key:
        headers["Authorization"] = f"Bearer {job.api_key}"
    budget = CpuBudget()
    events = Events(decode, job.max_events, budget)
    f = await fetch(session, url, body, headers, job.timeout, prefill.sink(events, trace_id, prompt.tokens), budget)
    ran = (time.perf_counter_ns() - f.stamps.t0_ns) * 1e-9  # until the request ended, however it ended
    _warn_if_unstamped(f.late)
    summary = await events.summary(f.stamps.t0_ns, gaps=f.error is None)  # a failed request: O(1), no ITL
    return build_result(job, prompt, trace_id, f.ts, f.status, f.stamps, events, summary, done_on_eof, f.error, ran)


_warned_late = False


def _warn_if_unstamped(late: int) -> None:
    """Say once per process when the arrival hook missed reads (e.g. an aiohttp upgrade changed internals)."""
    global _warned_late
    if late and not _warned_late:
        _warned_late = True
        log.warning("probe arrival hook missed %d reads: their timestamps include reader wake-up delay "
                    "(check the aiohttp version against sloguard/probes/arrival.py)", late)


async def _read(
    resp: aiohttp.ClientResponse, slicer: Slicer, chunks: list[tuple[int, bytes]] | None, sink: Sink | None,
) -> str | None:
    """Consume arrival-stamped reads until EOF or the sink's error; close the connection unless read to the end."""
    size = 0
    pieces: list[tuple[int, bytes]] = []
    try:
        async for data in resp.content.iter_any():
            pieces.clear()
            slicer.cut(data, time.perf_counter_ns(), pieces)
            for t_ns, piece in pieces:
                if chunks is not None:
                    chunks.append((t_ns, piece))
                if sink is not None and (err := await sink(t_ns, piece)) is not None:
                    return err
            size += len(data)
            if size > MAX_BODY_BYTES:
                return f"response larger than {MAX_BODY_BYTES} bytes"
    finally:
        if not resp.content.at_eof():
            resp.close()
    return None
