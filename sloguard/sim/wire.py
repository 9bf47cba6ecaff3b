"""OpenAI wire format as vLLM's OpenAI server speaks it: request parsing and response bodies (pure).

Streaming chat: a role-only first chunk (`delta: {role: assistant, content: ""}`), one chunk per token
batch, the last token chunk carries `finish_reason`, then (with `stream_options.include_usage`) a
`choices: []` usage chunk, then `data: [DONE]`. Completions have no role chunk.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Literal

from sloguard.sim.model import chat_tokens, prompt_tokens

Api = Literal["chat", "completions"]
DEFAULT_MAX_TOKENS: dict[Api, int] = {"chat": 128, "completions": 16}
MAX_MODEL_LEN = 32768
VOCAB = ("the", "model", "token", "latency", "server", "batch", "queue", "cache", "stream", "request",
         "fast", "slow", "GPU", "decode", "prefill", "and", "of", "to", "a", "in", "is", "for", "with", "on")
OBJECTS: dict[Api, tuple[str, str]] = {
    "chat": ("chat.completion.chunk", "chat.completion"),
    "completions": ("text_completion", "text_completion"),
}


class BadRequest(ValueError):
    """The request body is invalid; answered with HTTP 400 (or 404 for an unknown model)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class GenParams:
    """What the simulator needs from one completion request."""

    api: Api
    model: str
    prompt_tokens: int
    max_tokens: int
    ignore_eos: bool
    stream: bool
    include_usage: bool


class ContextOverflow(BadRequest):
    """The prompt and max_tokens do not fit the context length; `params` is what the request asked for."""

    def __init__(self, params: GenParams, max_model_len: int) -> None:
        super().__init__(
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{params.prompt_tokens + params.max_tokens} tokens ({params.prompt_tokens} in the messages, "
            f"{params.max_tokens} in the completion). Please reduce the length of the messages or completion.")
        self.params = params
        self.max_model_len = max_model_len


def _positive_int(body: dict[str, Any], key: str, default: int) -> int:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"{key} must be a positive integer, got {value!r}")
    return value


def parse(api: Api, body: object, served_model: str, max_model_len: int = MAX_MODEL_LEN) -> GenParams:
    """Return the request's parameters; BadRequest says what is wrong (ContextOverflow: too long)."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    model = body.get("model") or served_model
    if model != served_model:
        raise BadRequest(f"The model `{model}` does not exist.", status=404)
    try:
        n_prompt = chat_tokens(body.get("messages")) if api == "chat" else prompt_tokens(body.get("prompt"))
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    key = "max_completion_tokens" if api == "chat" and "max_completion_tokens" in body else "max_tokens"
    max_tokens = _positive_int(body, key, DEFAULT_MAX_TOKENS[api])
    opts = body.get("stream_options") or {}
    params = GenParams(api=api, model=model, prompt_tokens=n_prompt, max_tokens=max_tokens,
                       ignore_eos=bool(body.get("ignore_eos", False)), stream=bool(body.get("stream", False)),
                       include_usage=bool(isinstance(opts, dict) and opts.get("include_usage")))
    if n_prompt + max_tokens > max_model_len:
        raise ContextOverflow(params, max_model_len)
    return params


def token_text(rng: random.Random, n: int) -> str:
    """Return `n` generated tokens of text, one word per token."""
    return "".join(" " + rng.choice(VOCAB) for _ in range(n))


def _envelope(p: GenParams, rid: str, created: int, obj: str) -> dict[str, Any]:
    return {"id": rid, "object": obj, "created": created, "model": p.model}


def chunk(p: GenParams, rid: str, created: int, text: str | None, finish: str | None) -> bytes:
    """Return one SSE event; `text=None` on chat gives the role-only first chunk."""
    if p.api == "chat":
        delta = {"role": "assistant", "content": ""} if text is None else {"content": text}
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    else:
        choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
    if finish is not None:
        choice["stop_reason"] = None
    return sse({**_envelope(p, rid, created, OBJECTS[p.api][0]), "choices": [choice]})


def usage(p: GenParams, completion_tokens: int) -> dict[str, int]:
    """Return the OpenAI usage object."""
    return {"prompt_tokens": p.prompt_tokens, "total_tokens": p.prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens}


def usage_chunk(p: GenParams, rid: str, created: int, completion_tokens: int,
                metrics: dict[str, float] | None = None) -> bytes:
    """Return the final `choices: []` usage event (with vLLM's per-request `metrics` when given)."""
    extra = {"metrics": metrics} if metrics is not None else {}
    return sse({**_envelope(p, rid, created, OBJECTS[p.api][0]), "choices": [],
                "usage": usage(p, completion_tokens), **extra})


def full_response(p: GenParams, rid: str, created: int, text: str, finish: str, n: int) -> dict[str, Any]:
    """Return the non-streaming response body."""
    if p.api == "chat":
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text,
                                                          "tool_calls": []}}
    else:
        choice = {"index": 0, "text": text}
    choice.update({"logprobs": None, "finish_reason": finish, "stop_reason": None})
    return {**_envelope(p, rid, created, OBJECTS[p.api][1]), "choices": [choice], "usage": usage(p, n)}


def error_body(message: str, status: int, kind: str = "InternalServerError") -> dict[str, Any]:
    """Return an OpenAI-style error object."""
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def sse(obj: dict[str, Any]) -> bytes:
    """Return one `data:` event."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
