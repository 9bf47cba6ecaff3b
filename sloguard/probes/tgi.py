"""Hugging Face TGI `POST /generate_stream` probe: one token per event, totals in the final `details`."""

from __future__ import annotations

import json

import aiohttp

from sloguard import untrusted
from sloguard.model import ProbeResult
from sloguard.probes.chunk import Chunk, error_text
from sloguard.probes.job import ProbeJob
from sloguard.probes.stream import run_stream
from sloguard.probes.workload import Prompt
from sloguard.untrusted import Invalid


def decode_tgi(data: str) -> Chunk:
    """Decode one TGI stream event: one token per event; a special token (EOS) carries no user-visible text."""
    obj = json.loads(data)
    err = error_text(obj)
    if err is not None:
        return Chunk(error=err)
    token = obj.get("token")
    token = token if isinstance(token, dict) else {}
    text = token.get("text") if not token.get("special", False) else ""
    details = obj.get("details") or {}
    final = obj.get("generated_text") is not None or bool(details)
    if not isinstance(details, dict):
        raise Invalid("not_an_object", "details")
    output = untrusted.optional(untrusted.tokens, details.get("generated_tokens"), what="details.generated_tokens")
    return Chunk(content=bool(text), tokens=1 if token else None, output_tokens=output,
                 done=final, chars=len(text) if isinstance(text, str) else 0,
                 finish=str(details.get("finish_reason") or ""))


async def tgi(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt) -> ProbeResult:
    """Probe `POST /generate_stream` asking for `details` (generated token count); no ignore_eos in TGI."""
    body = {"inputs": prompt.text, "parameters": {"max_new_tokens": job.max_tokens, "details": True}}
    return await run_stream(session, job, prompt, f"{job.url}/generate_stream", body, decode_tgi)
