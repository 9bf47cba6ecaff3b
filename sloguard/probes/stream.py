"""The HTTP edge of every probe: send one streaming request, stamp each read, build the ProbeResult.

Timing: t0 is stamped by aiohttp's trace hooks when the connection is ready (`on_connection_create_end`
or `on_connection_reuseconn`), i.e. immediately before the request is written, so TTFT excludes TCP/TLS
set-up, which is reported as `connect_s` (0 on a reused connection). Each socket read is stamped with
`perf_counter_ns()` in the connection's `data_received`, before aiohttp parses it and before any coroutine
resumes (see `arrival`); an event split across reads gets the stamp of the read that completed it.
Events are split and decoded as they arrive (~10 us each), never in one block at the end of a stream:
assembling 1024 events at once held the probe loop ~8 ms, delaying every other stream's stamps.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import aiohttp

from sloguard.model import ProbeResult
from sloguard.probes.arrival import Slicer, StampedResponse
from sloguard.probes.job import ProbeJob
from sloguard.probes.sse import DONE, SSESplitter
from sloguard.probes.timing import Chunk, Summary, percentile, summarize
from sloguard.probes.workload import Prompt, traceparent
from sloguard.traces.record import record_fields

log = logging.getLogger("sloguard.probes")

Decoder = Callable[[str], Chunk]
MAX_BODY_BYTES = 16 * 1024 * 1024
_USERINFO = re.compile(r"//[^/@\s]+@")


@dataclass(slots=True)
class Stamps:
    """Per-request stamps written by the trace hooks (perf_counter_ns)."""

    t0_ns: int = 0
    connect_start_ns: int = 0
    connect_end_ns: int = 0
    head_ns: int = 0  # arrival of the response head (status line and headers), from the arrival hook


def _stamps(ctx: SimpleNamespace) -> Stamps | None:
    got = getattr(ctx, "trace_request_ctx", None)
    return got if isinstance(got, Stamps) else None


async def _on_create_start(_s: aiohttp.ClientSession, ctx: SimpleNamespace, _p: object) -> None:
    if (st := _stamps(ctx)) is not None:
        st.connect_start_ns = time.perf_counter_ns()


async def _on_connection_ready(_s: aiohttp.ClientSession, ctx: SimpleNamespace, _p: object) -> None:
    if (st := _stamps(ctx)) is not None:
        st.t0_ns = st.connect_end_ns = time.perf_counter_ns()


def make_session() -> aiohttp.ClientSession:
    """Return the probe session: trace hooks for t0/connect, arrival-stamped bodies, no pool limit."""
    trace = aiohttp.TraceConfig()
    trace.on_connection_create_start.append(_on_create_start)
    trace.on_connection_create_end.append(_on_connection_ready)
    trace.on_connection_reuseconn.append(_on_connection_ready)
    return aiohttp.ClientSession(
        trace_configs=[trace], auto_decompress=False, connector=aiohttp.TCPConnector(limit=0),
        response_class=StampedResponse,
    )


@dataclass(slots=True)
class Fetched:
    """The raw outcome of one streaming request: status, stamps, stamped reads, transport error.

    `late` counts reads the arrival hook did not see, stamped when the reader resumed instead (0 normally).
    """

    ts: float
    status: int | None
    stamps: Stamps
    chunks: list[tuple[int, bytes]]
    error: str | None
    late: int = 0


class Events:
    """Split and decode stamped reads as they arrive: `(arrival_ns, Chunk)` per event, in order."""

    def __init__(self, decode: Decoder) -> None:
        self._splitter, self._decode = SSESplitter(), decode
        self.events: list[tuple[int, Chunk]] = []

    def feed(self, t_ns: int, data: bytes) -> None:
        """Decode the events this read completed, each stamped by it."""
        for e in self._splitter.feed(data, t_ns):
            self.events.append((e.t_ns, _safe_decode(self._decode, e.data)))

    @property
    def unfinished(self) -> bool:
        """Return True when an event was left incomplete (a truncated stream at EOF)."""
        return self._splitter.pending


Sink = Callable[[int, bytes], None]


async def fetch(
    session: aiohttp.ClientSession, url: str, body: Mapping[str, Any], headers: Mapping[str, str],
    timeout: float, sink: Sink | None = None,
) -> Fetched:
    """POST and collect every read stamped on arrival, passing each to `sink`; never raises for faults.

    The timeout covers connect to last byte; on timeout or error the connection is closed, so the server
    sees the client go away and stops generating.
    """
    stamps, chunks, slicer = Stamps(), list[tuple[int, bytes]](), Slicer(())
    ts, status, error = time.time(), None, None
    stamps.t0_ns = time.perf_counter_ns()  # fallback when the session has no trace hooks
    try:
        async with asyncio.timeout(timeout):
            async with session.post(url, json=body, headers=headers, trace_request_ctx=stamps) as resp:
                status = resp.status
                stamps.head_ns = getattr(resp, "head_ns", 0)
                if status != 200:
                    text = (await resp.content.read(512)).decode("utf-8", "replace")
                    error = f"http {status}: {text.strip()}"
                else:
                    slicer = Slicer(resp.marks if isinstance(resp, StampedResponse) else ())
                    error = await _read(resp, slicer, chunks, sink)
    except TimeoutError:
        error = f"timeout after {timeout:g}s"
    except (aiohttp.ClientError, OSError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    return Fetched(ts, status, stamps, chunks, error, slicer.late)


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
    headers = {"traceparent": header, "Accept": "text/event-stream", "Accept-Encoding": "identity"}
    if job.api_key:
        headers["Authorization"] = f"Bearer {job.api_key}"
    events = Events(decode)
    f = await fetch(session, url, body, headers, job.timeout, events.feed)
    _warn_if_unstamped(f.late)
    return _result(job, prompt, trace_id, f.ts, f.status, f.stamps, events, done_on_eof, f.error)


_warned_late = False


def _warn_if_unstamped(late: int) -> None:
    """Say once per process when the arrival hook missed reads (e.g. an aiohttp upgrade changed internals)."""
    global _warned_late
    if late and not _warned_late:
        _warned_late = True
        log.warning("probe arrival hook missed %d reads: their timestamps include reader wake-up delay "
                    "(check the aiohttp version against sloguard/probes/arrival.py)", late)


async def _read(
    resp: aiohttp.ClientResponse, slicer: Slicer, chunks: list[tuple[int, bytes]], sink: Sink | None,
) -> str | None:
    """Append arrival-stamped reads until EOF; close the connection unless the body was read to the end."""
    size = 0
    try:
        async for data in resp.content.iter_any():
            done = len(chunks)
            slicer.cut(data, time.perf_counter_ns(), chunks)
            if sink is not None:
                for t_ns, piece in chunks[done:]:
                    sink(t_ns, piece)
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
    """Pure: stamped reads -> ProbeResult; the first fault wins: transport, error event, truncation."""
    events = Events(decode)
    for t_ns, data in chunks:
        events.feed(t_ns, data)
    return _result(job, prompt, trace_id, ts, status, stamps, events, done_on_eof, error)


def _result(
    job: ProbeJob, prompt: Prompt, trace_id: str, ts: float, status: int | None, stamps: Stamps,
    events: Events, done_on_eof: bool, error: str | None,
) -> ProbeResult:
    """Apply §4 to decoded events and build the ProbeResult."""
    summary = summarize(stamps.t0_ns, events.events)
    if error is None:
        error = _stream_error(summary, events.unfinished, done_on_eof)
    itls = sorted(summary.itls_s)
    connect = (stamps.connect_end_ns - stamps.connect_start_ns) * 1e-9 if stamps.connect_start_ns else 0.0
    head = (stamps.head_ns - stamps.t0_ns) * 1e-9 if stamps.head_ns >= stamps.t0_ns > 0 else None
    return ProbeResult(
        ts=ts, probe=job.name, target=job.target, model=job.model, api=job.api, ok=error is None,
        error=_redact(error, job.api_key), status_code=status, connect_s=connect if status else None,
        ttft_s=summary.ttft_s, ttfot_s=summary.ttfot_s, e2e_s=summary.e2e_s, tpot_s=summary.tpot_s,
        itl_p50_s=percentile(itls, 0.5) if itls else None,
        itl_p99_s=percentile(itls, 0.99) if itls else None,
        itl_max_s=itls[-1] if itls else None,
        prompt_tokens=summary.prompt_tokens, output_tokens=summary.output_tokens,
        prompt_bucket=prompt.bucket, trace_id=trace_id, itls_s=summary.itls_s, **record_fields(summary.record),
        head_s=head if status else None,
    )


def _stream_error(summary: Summary, unfinished: bool, done_on_eof: bool) -> str | None:
    if summary.error is not None:
        return f"error event: {summary.error}"
    if unfinished or not (summary.done or done_on_eof):
        return "truncated stream: ended before its terminator"
    if summary.ttft_s is None:
        return "no tokens in stream"
    return None


def _safe_decode(decode: Decoder, data: str) -> Chunk:
    if data == DONE:
        return Chunk(done=True)
    try:
        return decode(data)
    except (ValueError, TypeError, AttributeError, KeyError, IndexError):
        return Chunk(error=f"malformed event: {data[:80]!r}")


def _redact(error: str | None, api_key: str | None) -> str | None:
    """Strip URL credentials and the API key from an error message; cap it at 300 characters."""
    if error is None:
        return None
    error = _USERINFO.sub("//***@", error)
    if api_key:
        error = error.replace(api_key, "***")
    return error[:300]
