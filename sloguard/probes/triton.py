"""Triton `POST /v2/models/{model}/generate_stream` probe (TensorRT-LLM ensemble input names)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from sloguard.model import ProbeResult
from sloguard.probes.chunk import Chunk, error_text
from sloguard.probes.job import ProbeJob
from sloguard.probes.stream import run_stream
from sloguard.probes.workload import Prompt

DEFAULT_MODEL = "ensemble"


def decode_triton(data: str) -> Chunk:
    """Decode one generate_stream event; `text_output` is the token text (one event per decode step)."""
    obj = json.loads(data)
    err = error_text(obj)
    if err is not None:
        return Chunk(error=err)
    out = obj.get("text_output")
    text = "".join(map(str, out)) if isinstance(out, list) else out
    final = obj.get("triton_final_response") is True
    return Chunk(content=bool(text), done=final)


async def triton(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt) -> ProbeResult:
    """Probe Triton generate_stream; the stream ends at EOF (no terminator event), so EOF means done.

    Triton reports no token totals, so TPOT stays undefined (never derived from event counts).
    """
    body: dict[str, Any] = {"text_input": prompt.text, "max_tokens": job.max_tokens, "stream": True}
    url = f"{job.url}/v2/models/{job.model or DEFAULT_MODEL}/generate_stream"
    return await run_stream(session, job, prompt, url, body, decode_triton, done_on_eof=True)
