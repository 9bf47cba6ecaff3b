"""The oversized-prompt check: does a prompt over the context length get a fast 4xx?

The context length is the probe's `context_length`, else what the server says it serves (cached for
CONTEXT_TTL_S): `max_model_len` of the model in `/v1/models` (vLLM, SGLang), `meta.n_ctx` there or
`default_generation_settings.n_ctx` in `/props` (llama.cpp), `max_input_tokens` in `/info` (TGI). The prompt
has 1.5 × that many one-token words (+64), so it overflows under any usual tokenizer; the verdict is
sloguard.probes.checks.oversized_outcome, timed from the send to the answer (the status line and the
first 512 bytes of an error, or the end of an accepted stream).
"""

from __future__ import annotations

import random
import time
from typing import Any

import aiohttp

from sloguard import untrusted
from sloguard.model import ProbeResult
from sloguard.probes.abort import check_result
from sloguard.probes.checks import oversized_outcome, prompt_words
from sloguard.probes.enginestate import CheckError, read_capped
from sloguard.probes.events import Events
from sloguard.probes.job import ProbeJob
from sloguard.probes.openai import request_for
from sloguard.probes.stream import fetch
from sloguard.probes.workload import Prompt, filler
from sloguard.untrusted import Invalid
from sloguard.urls import api_root

CONTEXT_TTL_S = 600.0
MAX_CONTEXT = 4 * 1024 * 1024  # tokens a server may state; a longer context needs the probe's context_length
INFO_BYTES = 1024 * 1024
_served: dict[tuple[str, str], tuple[int, float]] = {}  # (root URL, model) -> (context length, read at)


def context_from(path: str, doc: Any, model: str) -> int | None:
    """Return the context length one discovery document states for `model` (pure), or None."""
    if not isinstance(doc, dict):
        return None
    if path == "/v1/models":
        cards = [c for c in doc.get("data") or () if isinstance(c, dict)]
        card = next((c for c in cards if c.get("id") == model), cards[0] if cards else {})
        found = card.get("max_model_len") or (card.get("meta") or {}).get("n_ctx")
    elif path == "/props":
        found = (doc.get("default_generation_settings") or {}).get("n_ctx") or doc.get("n_ctx")
    else:
        found = doc.get("max_input_tokens") or doc.get("max_input_length")
    if found is None or found is False:
        return None
    try:
        return untrusted.count(found, hi=MAX_CONTEXT, what=f"{path} context length") or None
    except Invalid as exc:  # the prompt is 1.5x this many words: a forged 10^12 would exhaust memory
        untrusted.reject("probe", exc.reason, str(exc))
        return None


async def served_context(session: aiohttp.ClientSession, job: ProbeJob) -> int | None:
    """Return the context length the server says it serves for the job's model (cached), or None."""
    key = (api_root(job.url), job.model)
    got = _served.get(key)
    if got is not None and time.monotonic() - got[1] < CONTEXT_TTL_S:
        return got[0]
    headers = {"Authorization": f"Bearer {job.api_key}"} if job.api_key else {}
    for path in ("/v1/models", "/props", "/info"):
        try:
            async with session.get(key[0] + path, headers=headers, allow_redirects=False,
                                   timeout=aiohttp.ClientTimeout(total=5.0)) as resp:
                doc = untrusted.json_doc(await read_capped(resp, INFO_BYTES)) if resp.status == 200 else None
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError, CheckError):
            continue
        found = context_from(path, doc, job.model)
        if found is not None:
            _served[key] = (found, time.monotonic())
            return found
    return None


async def oversized_prompt(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt) -> ProbeResult:
    """Run one oversized-prompt check (module docstring)."""
    ts = time.time()
    context = job.context_length or await served_context(session, job)
    if context is None:
        return check_result(job, prompt, ts, "error", None, "context length unknown: the server states none "
                            "(/v1/models, /props, /info); set the probe's context_length")
    words = prompt_words(context)
    text = filler(words, f"{random.getrandbits(32):08x}")
    url, body, decode = request_for(job, text)
    headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
    if job.api_key:
        headers["Authorization"] = f"Bearer {job.api_key}"
    events = Events(decode, job.max_events)
    t0 = time.perf_counter()
    got = await fetch(session, url, body, headers, job.timeout, events.feed)
    elapsed = time.perf_counter() - t0
    timed_out = (got.error or "").startswith("timeout")
    counted = events.tally.prompt
    outcome = oversized_outcome(got.status, timed_out, elapsed, job.within, counted, context)
    why = {
        "slow_reject": f"rejected after {elapsed:.2f}s (bound {job.within:g}s)",
        "accepted": f"accepted a prompt of ~{words} tokens over a context of {context}",
        "truncated": f"answered after cutting the prompt to {counted} tokens (context {context}) without an error",
        "hung": f"no answer within {job.timeout:g}s to a prompt over the context length",
        "server_error": f"http {got.status} instead of a 4xx: {got.error}",
        "error": got.error,
    }
    return check_result(job, prompt, ts, outcome, elapsed, why.get(outcome), status_code=got.status,
                        prompt_tokens=counted or words)
