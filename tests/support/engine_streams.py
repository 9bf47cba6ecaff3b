"""Byte-exact streaming responses of real engines, and a loopback server that replays them with known timings.

The bytes follow the engines' own serialisers (not a capture of a live server):
- llama.cpp `llama-server` (tools/server/server-task.cpp, `to_json_oaicompat_chat_stream` of the partial and
  final results, ggml-org/llama.cpp 00efb3e1; nlohmann ordered JSON, compact), checked against the real
  captures in tests/fixtures/streams (head, chunking and close as captured): the first token's chunk holds a
  role event and its content event; a token that does not complete UTF-8 sends nothing; the end is one chunk
  with a finish event with an empty `delta` (reason "stop" for end-of-sequence or a stop word, "length" for
  max_tokens) and the usage event carrying `timings`, then `[DONE]`, then the socket is closed despite
  `Keep-Alive: timeout=5, max=100`. `completion_tokens` = n_decoded, which counts the end-of-sequence token.
- vLLM's OpenAI server (vllm/entrypoints/openai/serving_chat.py, vllm-project/vllm 003fe593; pydantic
  `model_dump_json(exclude_unset=True)`, uvicorn + h11 chunked framing): a role event with `content: ""`,
  then one event per engine step = one token, with `content: ""` when the token decodes to no text yet,
  the end-of-sequence token as an empty-content event with `finish_reason: "stop"`, the usage chunk, `[DONE]`.
  `token_ids` per choice only when the request asks for `return_token_ids`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

CREATED, FINGERPRINT = 1764000000, "b6123-abcdef01"
LLAMA_HEAD = (b"HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nAccess-Control-Allow-Origin: \r\n"
              b"X-Accel-Buffering: no\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
              b"Keep-Alive: timeout=5, max=100\r\n\r\n")
VLLM_HEAD = (b"HTTP/1.1 200 OK\r\ndate: Mon, 24 Nov 2026 09:00:00 GMT\r\nserver: uvicorn\r\n"
             b"content-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n")
DONE = b"data: [DONE]\n\n"


def sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


@dataclass
class Step:
    """One server write: after `delay_s`, these events; `token` says it carries a generated token (truth).

    `chunks` groups the events into HTTP chunks (default: one chunk per event), as the server framed them.
    """

    delay_s: float
    events: list[bytes]
    token: bool = True
    text: bool = True
    chunks: list[int] | None = None  # events per chunk

    def framed(self) -> bytes:
        sizes = self.chunks or [1] * len(self.events)
        out, i = [], 0
        for n in sizes:
            out.append(chunked(b"".join(self.events[i : i + n])))
            i += n
        return b"".join(out)


@dataclass
class Script:
    """A whole response: head, steps, and the true token total the usage reports."""

    head: bytes
    steps: list[Step]
    tokens: int
    close_after: bool = False
    name: str = ""
    tail: list[bytes] = field(default_factory=list)


def _llama_chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"choices": choices, "created": CREATED, "id": "chatcmpl-Qx7", "model": "tiny-llama",
            "system_fingerprint": FINGERPRINT, "object": "chat.completion.chunk", **extra}


def _llama_delta(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return sse(_llama_chunk([{"finish_reason": finish, "index": 0, "delta": delta}]))


def llamacpp_chat(texts: Sequence[str], gap_s: float, finish: str = "stop", first_s: float = 0.02,
                  prompt: int = 11) -> Script:
    """llama-server streaming `texts` (one decoded token each; "" = held back) and then `finish`.

    finish "stop": the end-of-sequence token is sampled one step after the last text and counted in usage.
    """
    steps: list[Step] = []
    role = _llama_delta({"role": "assistant", "content": None})
    for i, text in enumerate(texts):  # a held-back token ("") sends nothing: the next text event carries it
        events = [role] if i == 0 and text else []
        if text:
            events.append(_llama_delta({"content": text}))
        steps.append(Step(first_s if i == 0 else gap_s, events, token=bool(text), text=bool(text),
                          chunks=[len(events)]))
    n = len(texts) + (1 if finish == "stop" else 0)
    timings = {"cache_n": 0, "prompt_n": prompt, "prompt_ms": 7.5, "prompt_per_token_ms": 0.68,
               "prompt_per_second": 1466.7, "predicted_n": n, "predicted_ms": n * gap_s * 1e3,
               "predicted_per_token_ms": gap_s * 1e3, "predicted_per_second": 1 / gap_s}
    usage = {"completion_tokens": n, "prompt_tokens": prompt, "total_tokens": n + prompt}
    end = [_llama_delta({}, finish), sse(_llama_chunk([], usage=usage, timings=timings)), DONE]
    if not texts:  # the first token is EOS: its partial result still sends the role event (captured)
        steps.append(Step(first_s, [role], token=False, text=False))
    if finish == "stop":  # the EOS step: nothing but the finish event carries it
        steps.append(Step(gap_s if texts else 0.0001, end, token=True, text=False, chunks=[2, 1]))
    else:  # max_tokens: the final result follows the last token at once
        steps[-1].events.extend(end)
        steps[-1].chunks = [*(steps[-1].chunks or []), 2, 1]
    return Script(LLAMA_HEAD, steps, n, close_after=True, name=f"llama.cpp {finish}")


def _vllm_chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-8f3a", "object": "chat.completion.chunk", "created": CREATED, "model": "tiny-vllm",
            "choices": choices, **extra}


def _vllm_choice(content: str, finish: str | None, token_id: int | None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": {"content": content}, "logprobs": None, "finish_reason": finish}
    if finish is not None:
        choice["stop_reason"] = None
    if token_id is not None:
        choice["token_ids"] = [token_id]
    return choice


def vllm_chat(texts: Sequence[str], gap_s: float, finish: str = "stop", first_s: float = 0.02,
              prompt: int = 11, token_ids: bool = False) -> Script:
    """vLLM streaming one event per token (`""` = a token with no text yet), then EOS if `finish` is "stop"."""
    role = sse(_vllm_chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                             "finish_reason": None}]))
    steps = [Step(0.001, [role], token=False, text=False)]
    n = len(texts) + (1 if finish == "stop" else 0)
    for i, text in enumerate(texts):
        last = i == len(texts) - 1 and finish == "length"
        choice = _vllm_choice(text, "length" if last else None, 100 + i if token_ids else None)
        steps.append(Step(first_s if i == 0 else gap_s, [sse(_vllm_chunk([choice]))], token=True, text=bool(text)))
    if finish == "stop":
        eos = _vllm_choice("", "stop", 2 if token_ids else None)
        steps.append(Step(first_s if not texts else gap_s, [sse(_vllm_chunk([eos]))], token=True, text=False))
    usage = {"prompt_tokens": prompt, "total_tokens": prompt + n, "completion_tokens": n}
    steps[-1].events.extend([sse(_vllm_chunk([], usage=usage)), DONE])
    return Script(VLLM_HEAD, steps, n, name=f"vLLM {finish}")


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@dataclass
class Played:
    """Server-side send stamps (perf_counter_ns, before the write) of each step of one response."""

    script: Script
    sent_ns: list[int] = field(default_factory=list)

    def truth_tpot_s(self) -> float:
        """(last token's send − first text's send) / (tokens − 1), from the server's own stamps."""
        steps = self.script.steps
        first = next(i for i, s in enumerate(steps) if s.text)
        last = max(i for i, s in enumerate(steps) if s.token)
        return (self.sent_ns[last] - self.sent_ns[first]) * 1e-9 / (self.script.tokens - 1)

    def truth_gaps_s(self) -> list[float]:
        """Gaps between successive token-carrying steps, from the server's stamps."""
        t = [ns for ns, s in zip(self.sent_ns, self.script.steps, strict=True) if s.token]
        return [(b - a) * 1e-9 for a, b in pairwise(t)]


class ReplayServer:
    """Loopback HTTP/1.1 server answering each POST with the next script, byte for byte, chunked per write."""

    def __init__(self, scripts: Callable[[int], Script]) -> None:
        self._scripts, self.played, self.connections = scripts, list[Played](), 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> ReplayServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while await read_request(reader):
                script = self._scripts(len(self.played))
                played = Played(script)
                self.played.append(played)
                writer.write(script.head)
                for step in script.steps:
                    await asyncio.sleep(step.delay_s)
                    played.sent_ns.append(time.perf_counter_ns())
                    writer.write(step.framed())
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                if script.close_after:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def read_request(reader: asyncio.StreamReader) -> bool:
    """Read one request (head + Content-Length body); False at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return False
    length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0)
    await reader.readexactly(length)
    return True


def stamped_reads(script: Script, first_ms: int = 10, gap_ms: int = 20) -> list[tuple[int, bytes]]:
    """The script's body as reads stamped on an exact clock (ms), one read per server write."""
    return [(first_ms + gap_ms * i, b"".join(step.events)) for i, step in enumerate(script.steps)]
