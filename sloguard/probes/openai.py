"""OpenAI-compatible chat and completions SSE probes (vLLM, SGLang, llama.cpp, TRT-LLM serve, gateways)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import aiohttp

from sloguard import untrusted
from sloguard.model import ProbeResult
from sloguard.probes.chunk import Chunk, error_text
from sloguard.probes.job import ProbeJob
from sloguard.probes.stream import run_stream
from sloguard.probes.workload import Prompt
from sloguard.traces.inband import inband_record
from sloguard.traces.record import ServerRecord
from sloguard.untrusted import Invalid
from sloguard.urls import api_endpoint


def _usage(obj: dict[str, Any]) -> tuple[int | None, int | None]:
    """Return (output, prompt) tokens from `usage`, else from llama.cpp's `timings`; Invalid when out of range."""
    usage = obj.get("usage") or {}
    timings = obj.get("timings") or {}
    if not isinstance(usage, dict) or not isinstance(timings, dict):
        raise Invalid("not_an_object", "usage")
    output = usage.get("completion_tokens", timings.get("predicted_n"))
    prompt = usage.get("prompt_tokens", timings.get("prompt_n"))
    return (untrusted.optional(untrusted.tokens, output, what="usage.completion_tokens"),
            untrusted.optional(untrusted.tokens, prompt, what="usage.prompt_tokens"))


def checked_record(record: ServerRecord | None) -> ServerRecord | None:
    """Return an in-band record whose times are finite seconds and whose counts are token counts, or raise Invalid."""
    if record is None:
        return None
    times = {k: untrusted.optional(untrusted.seconds, getattr(record, k), what=f"record.{k}")
             for k in ("ttft_s", "queue_s", "prefill_s", "decode_s", "e2e_s")}
    counts = {k: untrusted.optional(untrusted.tokens, getattr(record, k), what=f"record.{k}")
              for k in ("output_tokens", "prompt_tokens")}
    return dataclasses.replace(record, **times, **counts)


def _stated_tokens(choice: dict[str, Any], key: str) -> int | None:
    """Tokens an event states: vLLM's `token_ids` (return_token_ids), else the logprobs entries."""
    ids = choice.get("token_ids")
    if isinstance(ids, list):
        return len(ids)
    lp = choice.get("logprobs")
    items = lp.get(key) if isinstance(lp, dict) else None
    return len(items) if isinstance(items, list) and items else None


def _decode(data: str, chat: bool) -> Chunk:
    obj = json.loads(data)
    err = error_text(obj)
    if err is not None:
        return Chunk(error=err)
    content = reasoning = step = False
    finish = ""
    tokens: int | None = None
    chars = 0
    for choice in obj.get("choices") or ():
        if chat:
            delta = choice.get("delta") or {}
            text, thought = _text(delta.get("content")), _text(delta.get("reasoning_content") or delta.get("reasoning"))
            content, reasoning = content or bool(text), reasoning or bool(thought)
            chars += len(text) + len(thought)
            n = _stated_tokens(choice, "content")
            opening = "role" in delta  # the role-only opening event is no generation step
        else:
            text, thought = _text(choice.get("text")), ""
            content, chars = content or bool(text), chars + len(text)
            n = _stated_tokens(choice, "tokens")
            opening = False
        tokens = n if tokens is None else tokens + (n or 0)
        finish = finish or _text(choice.get("finish_reason"))
        step = step or not (text or thought or opening)
    output, prompt = _usage(obj)
    return Chunk(content=content, reasoning=reasoning, tokens=tokens, output_tokens=output, prompt_tokens=prompt,
                 done=bool(finish), chars=chars, step=step and not (content or reasoning), finish=finish,
                 record=checked_record(inband_record(obj)))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def decode_chat(data: str) -> Chunk:
    """Decode one chat.completion.chunk; reasoning from `delta.reasoning_content` or `delta.reasoning`."""
    return _decode(data, chat=True)


def decode_completion(data: str) -> Chunk:
    """Decode one text_completion chunk."""
    return _decode(data, chat=False)


def _endpoint(job: ProbeJob, path: str) -> str:
    return api_endpoint(job.url, f"/v1/{path}")


def _body(job: ProbeJob, extra: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        **extra, "max_tokens": job.max_tokens, "stream": True, "stream_options": {"include_usage": True},
    }
    if job.model:
        body["model"] = job.model
    if job.ignore_eos:
        body["ignore_eos"] = True  # vLLM/SGLang/llama.cpp extension; sent only when asked for
    return body


async def chat(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt) -> ProbeResult:
    """Probe `POST /v1/chat/completions` with one user message."""
    body = _body(job, {"messages": [{"role": "user", "content": prompt.text}]})
    return await run_stream(session, job, prompt, _endpoint(job, "chat/completions"), body, decode_chat)


async def completions(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt) -> ProbeResult:
    """Probe `POST /v1/completions` with the raw prompt."""
    body = _body(job, {"prompt": prompt.text})
    return await run_stream(session, job, prompt, _endpoint(job, "completions"), body, decode_completion)


def request_for(job: ProbeJob, text: str) -> tuple[str, dict[str, Any], Callable[[str], Chunk]]:
    """Return (URL, body, decoder) of the job's API (chat or completions) for one prompt text: the
    guardrail checks (sloguard.probes.abort, .oversized) send the same requests the latency probes do."""
    if job.api == "completions":
        return _endpoint(job, "completions"), _body(job, {"prompt": text}), decode_completion
    messages = [{"role": "user", "content": text}]
    return _endpoint(job, "chat/completions"), _body(job, {"messages": messages}), decode_chat
