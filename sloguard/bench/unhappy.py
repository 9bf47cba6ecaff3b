"""Unhappy-path bench behaviours: a client that disconnects after k tokens, an oversized prompt, a slow reader.

Each sends what the probes send (the OpenAI chat or completions body of sloguard.probes.openai) through the
probes' stamped fetch, so TTFT and the other timings keep their definitions:
- `disconnect@K` (K = 8): read K token-bearing events, then hang up (the server should stop generating:
  sloguard's abort check); ok when K tokens came; e2e = the time of the K-th token, output_tokens = K;
- `oversized`: a prompt over the served context length (sloguard.probes.oversized); ok when the server
  answers with a 4xx within 1 s (the check's verdict and time in check_outcome / check_s);
- `slow_reader@R` (R = 10): read the stream at most R events per second (a client on a slow link: the reads
  pause, the socket's buffers fill, the server's writes back up); ok when the stream completed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import aiohttp

from sloguard.model import ProbeResult
from sloguard.probes.events import Decoder, safe_decode
from sloguard.probes.job import ProbeJob
from sloguard.probes.openai import request_for
from sloguard.probes.oversized import oversized_prompt
from sloguard.probes.sse import SSESplitter
from sloguard.probes.stream import EVENT_STREAM, assemble, fetch
from sloguard.probes.workload import Prompt, traceparent

HUNG_UP = "hung up on purpose"  # the sink's stop signal (never a result's error)
DEFAULTS = {"disconnect": 8.0, "slow_reader": 10.0}


def _headers(job: ProbeJob) -> tuple[dict[str, str], str]:
    header, trace_id = traceparent()
    headers = {"traceparent": header, "Accept": EVENT_STREAM, "Accept-Encoding": "identity"}
    if job.api_key:
        headers["Authorization"] = f"Bearer {job.api_key}"
    return headers, trace_id


class _Counter:
    """Count token-bearing events as reads arrive (an SSE splitter of its own, beside the stamped chunks)."""

    def __init__(self, decode: Decoder) -> None:
        self._splitter, self._decode, self.tokens = SSESplitter(), decode, 0

    def feed(self, data: bytes) -> int:
        """Return how many token-bearing events this read completed."""
        before = self.tokens
        for event in self._splitter.feed(data, 0):
            if safe_decode(self._decode, event.data).bearing:
                self.tokens += 1
        return self.tokens - before


async def disconnect(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt, k: int) -> ProbeResult:
    """Stream until `k` token-bearing events arrived, then close the connection."""
    url, body, decode = request_for(job, prompt.text)
    headers, trace_id = _headers(job)
    counter, chunks = _Counter(decode), list[tuple[int, bytes]]()

    async def sink(t_ns: int, data: bytes) -> str | None:
        chunks.append((t_ns, data))
        counter.feed(data)
        return HUNG_UP if counter.tokens >= k else None

    f = await fetch(session, url, body, headers, job.timeout, sink)
    hung_up = f.error == HUNG_UP
    r = assemble(job, prompt, trace_id, f.ts, f.status, f.stamps, chunks, decode, hung_up,
                 None if hung_up else f.error)
    if hung_up:  # the stream was cut on purpose: no terminator, no usage
        r = dataclasses.replace(r, ok=True, error=None, output_tokens=counter.tokens)
    return r


async def slow_reader(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt, rate: float) -> ProbeResult:
    """Read the stream at most `rate` token-bearing events per second."""
    url, body, decode = request_for(job, prompt.text)
    headers, trace_id = _headers(job)
    counter, chunks = _Counter(decode), list[tuple[int, bytes]]()
    start = time.monotonic()

    async def sink(t_ns: int, data: bytes) -> str | None:
        chunks.append((t_ns, data))
        counter.feed(data)
        behind = counter.tokens / rate - (time.monotonic() - start)
        if behind > 0:
            await asyncio.sleep(behind)  # no read meanwhile: the socket's buffers fill up
        return None

    f = await fetch(session, url, body, headers, job.timeout, sink)
    return assemble(job, prompt, trace_id, f.ts, f.status, f.stamps, chunks, decode, False, f.error)


async def oversized(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt) -> ProbeResult:
    """Send a prompt over the context length; ok when a 4xx comes within 1 s (the oversized-prompt check)."""
    check = dataclasses.replace(job, kind="oversized_prompt", within=job.within or 1.0, max_tokens=16)
    return await oversized_prompt(session, check, prompt)
