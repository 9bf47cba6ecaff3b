"""The abort-propagation check: does a client that goes away free its GPU slot?

One run: read the engine's request signals (sloguard.probes.enginestate), send a long generation
(`ignore_eos`, a large `max_tokens`), read it until the first token, read the signals again while the
request holds its slot, close the connection, then read /metrics every POLL_S until the engine shows the
request gone (its abort count rose, or its running count fell: sloguard.probes.checks.released) or the
probe's `timeout` ends the watch. The time to release is counted from the close to the first read that shows
it (an upper bound, within one poll of the truth); within `within` the check passes.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from sloguard.model import ProbeResult
from sloguard.probes.checks import PASSED, EngineState, abort_outcome, released
from sloguard.probes.enginestate import CheckError, EngineReader
from sloguard.probes.events import Decoder, safe_decode
from sloguard.probes.job import ProbeJob
from sloguard.probes.openai import request_for
from sloguard.probes.sse import SSESplitter
from sloguard.probes.workload import Prompt

POLL_S = 0.1
# /metrics URLs whose abort count was seen to rise when a check's request was released: from then on only
# that count decides (sloguard.probes.checks.released). Per probe process, so a restart learns it again.
_COUNTING: set[str] = set()


def check_result(job: ProbeJob, prompt: Prompt, ts: float, outcome: str, seconds: float | None,
                 error: str | None, status_code: int | None = None, ttft_s: float | None = None,
                 prompt_tokens: int | None = None) -> ProbeResult:
    """Return a guardrail check's result: ok when it passed, `error` says why not (API key never in it)."""
    ok = outcome in PASSED
    text = None if ok else (error or outcome)
    if text is not None and job.api_key:
        text = text.replace(job.api_key, "***")
    return ProbeResult(ts=ts, probe=job.name, target=job.target, model=job.model, api=job.api, ok=ok,
                       error=text[:300] if text is not None else None, status_code=status_code, ttft_s=ttft_s,
                       prompt_tokens=prompt_tokens, prompt_bucket=prompt.bucket, check_kind=job.kind,
                       check_outcome=outcome, check_s=seconds)


async def abort(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt) -> ProbeResult:
    """Run one abort-propagation check (module docstring)."""
    ts = time.time()
    reader = EngineReader(job.metrics_url, job.engine, job.api_key)
    try:
        base = await reader.read(session)
        held, ttft, status = await _hold_and_close(session, job, prompt, reader)
    except CheckError as exc:
        return check_result(job, prompt, ts, "error", None, str(exc))
    closed = time.perf_counter()
    release_s = await _watch(session, reader, (base, held), closed, job.timeout)
    outcome = abort_outcome(release_s, job.within)
    waited = release_s if release_s is not None else time.perf_counter() - closed
    why = {"slow_release": f"released {waited:.2f}s after the client left (bound {job.within:g}s)",
           "leaked": f"still running {waited:.1f}s after the client left: the abort did not propagate"}
    return check_result(job, prompt, ts, outcome, waited, why.get(outcome), status_code=status, ttft_s=ttft)


async def _hold_and_close(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt,
                          reader: EngineReader) -> tuple[EngineState, float, int]:
    """Stream until the first token, read the engine while the request holds its slot, then hang up."""
    url, body, decode = request_for(job, prompt.text)
    headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
    if job.api_key:
        headers["Authorization"] = f"Bearer {job.api_key}"
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(job.timeout):
            async with session.post(url, json=body, headers=headers, allow_redirects=False) as resp:
                if resp.status != 200:
                    text = (await resp.content.read(300)).decode("utf-8", "replace").strip()
                    raise CheckError(f"the request failed before its first token: http {resp.status}: {text}")
                ttft = await _first_token(resp, decode) - t0
                held = await reader.read(session)
                resp.close()  # the client goes away; what follows is the server's business
                return held, ttft, resp.status
    except TimeoutError:
        raise CheckError(f"no first token within {job.timeout:g}s") from None
    except (aiohttp.ClientError, OSError) as exc:
        raise CheckError(f"the request failed before its first token: {type(exc).__name__}: {exc}") from None


async def _first_token(resp: aiohttp.ClientResponse, decode: Decoder) -> float:
    """Read SSE events until one carries generated text; return when it arrived (perf_counter)."""
    splitter = SSESplitter()
    async for data in resp.content.iter_any():
        for event in splitter.feed(data, 0):
            chunk = safe_decode(decode, event.data)
            if chunk.error is not None:
                raise CheckError(f"the request failed before its first token: {chunk.error}")
            if chunk.bearing:
                return time.perf_counter()
            if chunk.done:
                raise CheckError("the request ended before its first token (does the server honour ignore_eos?)")
    raise CheckError("the stream ended before its first token")


async def _watch(session: aiohttp.ClientSession, reader: EngineReader, before: tuple[EngineState, EngineState],
                 closed: float, timeout: float) -> float | None:
    """Poll until the engine shows the request gone; return seconds from the close, or None at the timeout."""
    base, held = before
    deadline = closed + timeout
    while time.perf_counter() < deadline:
        try:
            now = await reader.read(session, timeout=max(0.1, deadline - time.perf_counter()))
        except CheckError:
            now = None  # one failed read is not a verdict; the watch goes on
        seen = time.perf_counter()
        if now is not None and released(base, held, now, reader.url in _COUNTING):
            if now.aborted is not None and base.aborted is not None and now.aborted > base.aborted:
                _COUNTING.add(reader.url)
            return seen - closed
        await asyncio.sleep(POLL_S)
    return None
