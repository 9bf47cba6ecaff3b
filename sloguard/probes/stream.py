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
events than the probe's `max_events` `event flood: ...`; the status code the server sent is kept throughout.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from sloguard.model import ProbeResult
from sloguard.probes import prefill
from sloguard.probes.arrival import Arrivals, Slicer, StampedResponse, capturing
from sloguard.probes.connection import SETTLE_S, FreshConnector
from sloguard.probes.events import Decoder, Events
from sloguard.probes.job import ProbeJob
from sloguard.probes.timing import Summary
from sloguard.probes.workload import Prompt, traceparent
from sloguard.traces.record import record_fields

log = logging.getLogger("sloguard.probes")

MAX_BODY_BYTES = 16 * 1024 * 1024
EVENT_STREAM = "text/event-stream"
_USERINFO = re.compile(r"//[^/@\s]+@")
__all__ = ["Decoder", "Events", "Fetched", "Stamps", "assemble", "fetch", "make_session", "run_stream"]


@dataclass(slots=True)
class Stamps:
    """Per-request stamps written by the trace hooks (perf_counter_ns)."""

    t0_ns: int = 0
    connect_start_ns: int = 0
    connect_end_ns: int = 0
    head_ns: int = 0  # arrival of the response head (status line and headers), from the arrival hook
    body_ns: int = 0  # arrival of the first body bytes


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
        response_class=StampedResponse,
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


Sink = Callable[[int, bytes], Awaitable[str | None]]  # returns an error to stop reading


async def fetch(
    session: aiohttp.ClientSession, url: str, body: Mapping[str, Any], headers: Mapping[str, str],
    timeout: float, sink: Sink | None = None,
) -> Fetched:
    """POST and collect every read stamped on arrival, passing each to `sink`; never raises for faults.

    The timeout is a hard deadline from connect to last byte; on timeout or error the connection is closed,
    so the server sees the client go away and stops generating. Redirects are not followed.
    """
    stamps, slicer = Stamps(), Slicer(())
    chunks: list[tuple[int, bytes]] | None = [] if sink is None else None
    ts, status, error = time.time(), None, None
    stamps.t0_ns = time.perf_counter_ns()  # fallback when the session has no trace hooks
    with capturing() as cap:
        try:
            async with asyncio.timeout(timeout):
                async with session.post(url, json=body, headers=headers, trace_request_ctx=stamps,
                                        allow_redirects=False) as resp:
                    status = resp.status
                    stamps.head_ns = getattr(resp, "head_ns", 0)
                    _to_written(stamps, cap.log)
                    error = await _head_error(resp)
                    if error is None:
                        slicer = Slicer(resp.marks if isinstance(resp, StampedResponse) else ())
                        error = await _read(resp, slicer, chunks, sink)
                        stamps.body_ns = resp.marks[0][0] if isinstance(resp, StampedResponse) and resp.marks else 0
        except TimeoutError:
            error = f"timeout after {timeout:g}s"
        except (aiohttp.ClientError, OSError) as exc:
            error = describe(exc, cap.log)
        if error is None and _was_reset(cap.log):  # a reset can end a close-delimited body like EOF
            error = _reset(cap.log)
        if status is None and error is not None and cap.log is not None:
            status = cap.log.status  # aiohttp lost the head it parsed when later bytes were malformed
    return Fetched(ts, status, stamps, chunks or [], error, slicer.late)


def _to_written(stamps: Stamps, log: Arrivals | None) -> None:
    """Move t0 to when the request was written, if that write was seen on this request's connection.

    On loopback the answer's head can arrive before the writing `send()` returns (the kernel runs the server's
    receive path inside it): the request was written by then, so t0 is the earlier of the two stamps.
    """
    sent = log.sent_ns if log is not None else 0
    if stamps.t0_ns <= sent:  # not the previous request's write on a kept-alive connection
        stamps.t0_ns = min(sent, stamps.head_ns) if stamps.head_ns else sent


async def _head_error(resp: aiohttp.ClientResponse) -> str | None:
    """Return why a response head is not a stream to read (redirect, HTTP error, content type), else None."""
    if 300 <= resp.status < 400:
        return f"redirect {resp.status} to {safe_location(resp.headers.get('Location', ''))}"
    if resp.status != 200:
        text = (await resp.content.read(512)).decode("utf-8", "replace")
        return f"http {resp.status}: {text.strip()}"
    mime = resp.headers.get("Content-Type", "").partition(";")[0].strip().lower()
    if mime != EVENT_STREAM:
        return f"not an event stream ({mime or 'no content type'})"
    return None


def safe_location(location: str) -> str:
    """Return a redirect target without credentials, query or fragment (they may carry secrets)."""
    parts = urlsplit(location)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    origin = f"{parts.scheme}://{host}" if parts.scheme else ""
    cut = " (query removed)" if parts.query else ""
    return f"{origin}{parts.path}{cut}" or "(no Location)"


def describe(exc: BaseException, log: Arrivals | None) -> str:
    """Name a transport fault: a reset with the bytes received, a protocol error, or the exception."""
    if _was_reset(log) or getattr(exc, "errno", None) == errno.ECONNRESET:
        return _reset(log)
    parser = _cause(exc, HttpProcessingError)
    if parser is not None:
        return f"protocol error: {str(parser.message).splitlines()[0].rstrip(':') if parser.message else parser}"
    return f"{type(exc).__name__}: {exc}"


def _was_reset(log: Arrivals | None) -> bool:
    return log is not None and isinstance(log.lost, ConnectionResetError)


def _reset(log: Arrivals | None) -> str:
    return f"connection reset after {log.body_bytes if log is not None else 0} bytes"


def _cause(exc: BaseException, kind: type[HttpProcessingError]) -> HttpProcessingError | None:
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__
    return None


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
    events = Events(decode, job.max_events)
    f = await fetch(session, url, body, headers, job.timeout, prefill.sink(events, trace_id, prompt.tokens))
    ran = (time.perf_counter_ns() - f.stamps.t0_ns) * 1e-9  # until the request ended, however it ended
    _warn_if_unstamped(f.late)
    summary = await events.summary(f.stamps.t0_ns, gaps=f.error is None)  # a failed request: O(1), no ITL
    return _result(job, prompt, trace_id, f.ts, f.status, f.stamps, events, summary, done_on_eof, f.error, ran)


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
    return _result(job, prompt, trace_id, ts, status, stamps, events, summary, done_on_eof, error)


def _result(
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
        error=_redact(error, job.api_key), status_code=status, connect_s=connect if status else None,
        ttft_s=summary.ttft_s, ttfot_s=summary.ttfot_s, e2e_s=summary.e2e_s, tpot_s=summary.tpot_s,
        itl_p50_s=itl.p50_s if itl else None, itl_p99_s=itl.p99_s if itl else None,
        itl_max_s=itl.max_s if itl else None,
        prompt_tokens=summary.prompt_tokens, output_tokens=summary.output_tokens,
        prompt_bucket=prompt.bucket, trace_id=trace_id, **record_fields(summary.record), elapsed_s=elapsed_s,
        itl_counts=itl.counts if itl else (), itl_sum_s=itl.sum_s if itl else 0.0, t0_ns=stamps.t0_ns,
        head_s=head if status else None,
    )


DEFERRED_HEAD_S = 0.001  # a head followed by body bytes this soon was sent with the server's first output


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
        return f"error event: {summary.error}"
    if unfinished or not (summary.done or done_on_eof):
        return "truncated stream: ended before its terminator"
    if summary.token_events == 0:
        return "no tokens in stream"
    return None


def _redact(error: str | None, api_key: str | None) -> str | None:
    """Strip URL credentials and the API key from an error message; cap it at 300 characters."""
    if error is None:
        return None
    error = _USERINFO.sub("//***@", error)
    if api_key:
        error = error.replace(api_key, "***")
    return error[:300]

