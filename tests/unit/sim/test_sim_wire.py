"""OpenAI request parsing and vLLM-shaped response bodies."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from sloguard.sim.wire import DONE, BadRequest, GenParams, chunk, full_response, parse, token_text, usage_chunk

MODEL = "sim-llama-3-8b"


def event(raw: bytes) -> dict[str, Any]:
    assert raw.startswith(b"data: ") and raw.endswith(b"\n\n")
    out: dict[str, Any] = json.loads(raw[6:])
    return out


@pytest.mark.parametrize(("api", "body", "expected"), [
    ("chat", {"messages": [{"role": "user", "content": "abcd"}]},
     GenParams("chat", MODEL, 4, 128, False, False, False)),
    ("chat", {"model": MODEL, "messages": [{"role": "user", "content": "abcd"}], "max_completion_tokens": 9,
              "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True},
     GenParams("chat", MODEL, 4, 9, True, True, True)),
    ("completions", {"prompt": [1, 2, 3], "max_tokens": 2, "stream": True},
     GenParams("completions", MODEL, 3, 2, False, True, False)),
    ("completions", {"prompt": "x", "max_tokens": None}, GenParams("completions", MODEL, 1, 16, False, False, False)),
])
def test_parse(api: Any, body: dict[str, Any], expected: GenParams) -> None:
    assert parse(api, body, MODEL) == expected


@pytest.mark.parametrize(("api", "body", "status"), [
    ("chat", {"model": "gpt-4", "messages": [{"role": "user", "content": "a"}]}, 404),
    ("chat", {"messages": "hi"}, 400),
    ("completions", {"prompt": "a", "max_tokens": -1}, 400),
    ("completions", {"prompt": "a", "max_tokens": True}, 400),
    ("completions", {"prompt": [1] * 32000, "max_tokens": 1000}, 400),
    ("completions", ["not", "an", "object"], 400),
])
def test_parse_rejects(api: Any, body: object, status: int) -> None:
    with pytest.raises(BadRequest) as info:
        parse(api, body, MODEL)
    assert info.value.status == status


def test_chat_chunks() -> None:
    p = GenParams("chat", MODEL, 4, 2, False, True, True)
    role = event(chunk(p, "id1", 7, None, None))
    assert role["object"] == "chat.completion.chunk"
    assert role["choices"][0] == {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                  "finish_reason": None}
    last = event(chunk(p, "id1", 7, " hi", "length"))["choices"][0]
    assert last["delta"] == {"content": " hi"} and last["finish_reason"] == "length"
    use = event(usage_chunk(p, "id1", 7, 2))
    assert use["choices"] == [] and use["usage"] == {"prompt_tokens": 4, "total_tokens": 6, "completion_tokens": 2}
    assert DONE == b"data: [DONE]\n\n"


def test_completion_chunk_and_full_response() -> None:
    p = GenParams("completions", MODEL, 3, 2, False, False, False)
    assert event(chunk(p, "c", 1, " a", None))["choices"][0]["text"] == " a"
    full = full_response(p, "c", 1, " a b", "stop", 2)
    assert full["object"] == "text_completion" and full["choices"][0]["finish_reason"] == "stop"
    chat = full_response(GenParams("chat", MODEL, 3, 2, False, False, False), "c", 1, " a b", "length", 2)
    assert chat["choices"][0]["message"]["content"] == " a b" and chat["usage"]["total_tokens"] == 5


def test_token_text_one_word_per_token_and_seeded() -> None:
    text = token_text(random.Random(1), 5)
    assert len(text.split()) == 5 and text == token_text(random.Random(1), 5)
