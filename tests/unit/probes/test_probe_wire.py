"""Recorded byte streams of each API through the pure result builder: DESIGN.md §4 on every edge case."""

from __future__ import annotations

import json
import random
from bisect import bisect_left
from itertools import pairwise
from typing import Any

import pytest

from sloguard.model import ProbeResult
from sloguard.probes.job import ProbeJob
from sloguard.probes.openai import decode_chat, decode_completion
from sloguard.probes.stream import Decoder, Stamps, assemble
from sloguard.probes.tgi import decode_tgi
from sloguard.probes.timing import ITL_BUCKETS, gap_stats, percentile
from sloguard.probes.triton import decode_triton
from sloguard.probes.workload import Prompt

MS = 1_000_000
DECODERS: dict[str, tuple[Decoder, bool]] = {
    "chat": (decode_chat, False), "completions": (decode_completion, False),
    "tgi": (decode_tgi, False), "triton": (decode_triton, True),
}


def ev(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def chat(content: str | None = None, finish: str | None = None, role: bool = False, n_logprobs: int = 0,
         **delta: str) -> bytes:
    d: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
    if content is not None:
        d["content"] = content
    d.update(delta)
    choice: dict[str, Any] = {"index": 0, "delta": d, "finish_reason": finish}
    if n_logprobs:
        choice["logprobs"] = {"content": [{"token": "x", "logprob": 0.0}] * n_logprobs}
    return ev({"id": "c1", "object": "chat.completion.chunk", "choices": [choice]})


def usage(out: int, prompt: int = 67) -> bytes:
    return ev({"id": "c1", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": out}})


DONE = b"data: [DONE]\n\n"


def run(api: str, reads: list[tuple[int, bytes]], error: str | None = None, max_events: int = 10_000) -> ProbeResult:
    job = ProbeJob(name="p", target="t", api=api, url="http://x", model="m", api_key="sk-secret",
                   max_events=max_events)
    decode, on_eof = DECODERS[api]
    chunks = [(ms * MS, data) for ms, data in reads]
    return assemble(job, Prompt("hi", 64, "short"), "ab" * 16, 1.0, 200, Stamps(t0_ns=0), chunks, decode,
                    on_eof, error)


def approx(v: float | None) -> Any:
    return pytest.approx(v, abs=1e-9) if v is not None else None


def gap_fields(gaps: tuple[float, ...]) -> dict[str, Any]:
    """What a result keeps of its per-token gaps: p50/p99/max, per-bucket counts and sum."""
    if not gaps:
        return {"itl_p50_s": None, "itl_p99_s": None, "itl_max_s": None, "itl_counts": (), "itl_sum_s": 0.0}
    ordered = sorted(gaps)
    counts = [0] * (len(ITL_BUCKETS) + 1)
    for g in gaps:
        counts[bisect_left(ITL_BUCKETS, g)] += 1
    return {"itl_p50_s": percentile(ordered, 0.5), "itl_p99_s": percentile(ordered, 0.99),
            "itl_max_s": ordered[-1], "itl_counts": tuple(counts), "itl_sum_s": sum(gaps)}


# name, api, reads [(ms, bytes)], expected {field: value}
CASES: list[tuple[str, str, list[tuple[int, bytes]], dict[str, Any]]] = [
    ("vllm chat: role-only first chunk, usage-only chunk", "chat",
     [(10, chat(role=True)), (100, chat("a")), (110, chat("b")), (120, chat("c", "stop")),
      (121, usage(3) + DONE)],
     {"ok": True, "ttft_s": 0.1, "ttfot_s": 0.1, "e2e_s": 0.12, "tpot_s": 0.01, "itls_s": (0.01, 0.01),
      "output_tokens": 3, "prompt_tokens": 67}),
    ("uneven multi-token chunks: usage shared out by text length, not evenly", "chat",
     [*((10 * i, chat("a")) for i in range(1, 11)), (200, chat("b" * 10, "stop")), (201, usage(20) + DONE)],
     {"ok": True, "itls_s": (0.01,) * 19, "output_tokens": 20}),
    ("reasoning deltas: both spellings count for TTFT, not TTFOT", "chat",
     [(50, chat(reasoning_content="think")), (60, chat(reasoning="more")), (80, chat("ans", "stop")),
      (81, usage(3) + DONE)],
     {"ok": True, "ttft_s": 0.05, "ttfot_s": 0.08, "e2e_s": 0.08, "itls_s": (0.01, 0.02)}),
    ("empty content and usage-only chunks do not count", "chat",
     [(5, chat("")), (40, chat("a")), (90, usage(1) + DONE)],
     {"ok": True, "ttft_s": 0.04, "e2e_s": 0.04, "output_tokens": 1}),
    ("one token: TPOT undefined", "chat",
     [(40, chat("a", "length")), (41, usage(1) + DONE)], {"ok": True, "tpot_s": None, "itls_s": ()}),
    ("multi-token chunks counted by logprobs", "chat",
     [(10, chat("a", n_logprobs=1)), (40, chat("bcd", n_logprobs=3)), (50, chat("e", "stop", n_logprobs=1)),
      (51, usage(5) + DONE)],
     {"ok": True, "itls_s": (0.01, 0.01, 0.01, 0.01), "tpot_s": 0.01}),
    ("multi-token chunks estimated from usage", "chat",
     [(10, chat("aa")), (40, chat("bb")), (70, chat("cc", "stop")), (71, usage(6) + DONE)],
     {"ok": True, "itls_s": (0.015,) * 4, "tpot_s": 0.012, "output_tokens": 6}),
    ("usage one above text events: the empty finish chunk carries the EOS token", "chat",
     [(10, chat("a")), (20, chat("b")), (30, chat("", "stop")), (31, usage(3) + DONE)],
     {"ok": True, "itls_s": (0.01, 0.01), "e2e_s": 0.03, "tpot_s": 0.01}),
    ("packed: every event in one read", "chat",
     [(30, chat(role=True) + chat("a") + chat("b", "stop") + usage(2) + DONE)],
     {"ok": True, "ttft_s": 0.03, "e2e_s": 0.03, "itls_s": (0.0,), "tpot_s": 0.0}),
    ("events split across reads take the completing read's stamp", "chat",
     [(10, chat("a")[:9]), (25, chat("a")[9:]), (35, chat("b", "stop")[:-1]), (36, b"\n" + usage(2) + DONE)],
     {"ok": True, "ttft_s": 0.025, "e2e_s": 0.036}),
    ("comments skipped", "chat",
     [(1, b": ping\n\n"), (10, chat("a")), (12, b":keepalive\r\n\r\n"), (20, chat("b", "stop")), (21, DONE)],
     {"ok": True, "ttft_s": 0.01, "itls_s": (0.01,), "output_tokens": None, "tpot_s": None}),
    ("mid-stream error event", "chat",
     [(10, chat("a")), (20, ev({"error": {"message": "boom", "code": 500}}))],
     {"ok": False, "error": "error event: boom", "ttft_s": 0.01}),
    ("error event then [DONE] (vLLM ends errors that way)", "chat",
     [(10, chat("a")), (20, ev({"error": {"message": "boom", "code": 500}}) + DONE)],
     {"ok": False, "error": "error event: boom", "ttft_s": 0.01}),
    ("vLLM object=error event", "chat",
     [(10, chat("a")), (20, ev({"object": "error", "message": "oom", "code": 500}))],
     {"ok": False, "error": "error event: oom"}),
    ("truncated mid-event", "chat",
     [(10, chat("a")), (20, chat("b")[:20])],
     {"ok": False, "error": "truncated stream: ended before its terminator", "e2e_s": 0.01}),
    ("malformed event", "chat",
     [(10, chat("a")), (20, ev(b"{not json")), (30, DONE)], {"ok": False}),
    ("llama.cpp timings instead of usage", "chat",
     [(10, chat("a")), (20, chat("b")), (30, ev({"choices": [{"delta": {}, "finish_reason": "stop"}],
                                                 "timings": {"predicted_n": 2, "prompt_n": 11}})), (31, DONE)],
     {"ok": True, "output_tokens": 2, "prompt_tokens": 11, "tpot_s": 0.01}),
    ("completions", "completions",
     [(20, ev({"choices": [{"text": "a", "finish_reason": None}]})),
      (30, ev({"choices": [{"text": "b", "finish_reason": "length"}]})), (31, usage(2, 300) + DONE)],
     {"ok": True, "ttft_s": 0.02, "ttfot_s": 0.02, "e2e_s": 0.03, "tpot_s": 0.01, "prompt_tokens": 300}),
    ("tgi: the special EOS token shows no text but ends E2E; details give the total", "tgi",
     [(20, ev({"token": {"id": 1, "text": "a", "special": False}, "generated_text": None, "details": None})),
      (35, ev({"token": {"id": 2, "text": "b", "special": False}, "generated_text": None, "details": None})),
      (40, ev({"token": {"id": 3, "text": "</s>", "special": True}, "generated_text": "ab",
               "details": {"finish_reason": "eos_token", "generated_tokens": 3}}))],
     {"ok": True, "ttft_s": 0.02, "e2e_s": 0.04, "tpot_s": 0.01, "output_tokens": 3, "itls_s": (0.015, 0.005)}),
    ("tgi: an answer of only EOS is a success without TTFT", "tgi",
     [(20, ev({"token": {"id": 3, "text": "</s>", "special": True}, "generated_text": "",
               "details": {"finish_reason": "eos_token", "generated_tokens": 1}}))],
     {"ok": True, "ttft_s": None, "e2e_s": 0.02, "tpot_s": None, "itls_s": ()}),
    ("tgi error event", "tgi",
     [(20, ev({"token": {"id": 1, "text": "a", "special": False}, "generated_text": None})),
      (30, ev({"error": "Request failed during generation", "error_type": "generation"}))],
     {"ok": False, "error": "error event: Request failed during generation"}),
    ("tgi truncated before final details", "tgi",
     [(20, ev({"token": {"id": 1, "text": "a", "special": False}, "generated_text": None}))],
     {"ok": False, "error": "truncated stream: ended before its terminator"}),
    ("triton: EOF ends the stream, no token totals", "triton",
     [(15, ev({"model_name": "ensemble", "text_output": "a"})), (25, ev({"text_output": "b"}))],
     {"ok": True, "ttft_s": 0.015, "e2e_s": 0.025, "tpot_s": None, "itls_s": (0.01,)}),
    ("triton truncated mid-event", "triton",
     [(15, ev({"text_output": "a"})), (25, b'data: {"text_out')], {"ok": False}),
    ("triton error event", "triton",
     [(15, ev({"text_output": "a"})), (25, ev({"error": "model crashed"}))],
     {"ok": False, "error": "error event: model crashed"}),
    ("no tokens at all", "chat", [(10, chat(role=True)), (20, usage(0) + DONE)],
     {"ok": False, "error": "no tokens in stream", "ttft_s": None}),
    ("event flood: more events than max_events fails at once, keeping the timings reached", "chat",
     [(10, chat("a")), (20, chat("b") * 50), (30, chat("c", "stop") + usage(52) + DONE)],
     {"ok": False, "error": "event flood: more than 20 events", "ttft_s": 0.01}),
    ("an endless line is a protocol error", "chat",
     [(10, chat("a")), *((11 + i, b"data: " + b"x" * 200_000) for i in range(6))],
     {"ok": False, "error": "protocol error: event line longer than 1048576 bytes"}),
]


@pytest.mark.parametrize(("name", "api", "reads", "expected"), CASES, ids=[c[0] for c in CASES])
def test_stream(name: str, api: str, reads: list[tuple[int, bytes]], expected: dict[str, Any]) -> None:
    r = run(api, reads, max_events=20 if name.startswith("event flood") else 10_000)
    if "itls_s" in expected:  # the per-token gaps this case implies, as a result keeps them
        expected = {**{k: v for k, v in expected.items() if k != "itls_s"}, **gap_fields(expected["itls_s"])}
    for key, want in expected.items():
        got = getattr(r, key)
        if isinstance(want, tuple) or key == "itl_sum_s":
            assert got == pytest.approx(want, abs=1e-9), key
        elif isinstance(want, float):
            assert got == approx(want), key
        else:
            assert got == want, key


def test_itl_percentiles_and_trace_id() -> None:
    reads = [(10, chat("a")), (20, chat("b")), (40, chat("c")), (100, chat("d", "stop")), (101, DONE)]
    r = run("chat", reads)
    assert (r.itl_p50_s, r.itl_max_s) == (approx(0.02), approx(0.06))
    assert r.itl_p99_s == approx(0.02 + 0.04 * 0.98)
    assert (r.trace_id, r.prompt_bucket, r.model) == ("ab" * 16, "short", "m")


@pytest.mark.parametrize(("error", "shown"), [
    ("ClientConnectorError: http://user:pw@h/v1 failed", "ClientConnectorError: http://***@h/v1 failed"),
    ("http 401: bad key sk-secret", "http 401: bad key ***"),
    ("x" * 500, "x" * 300),
])
def test_transport_error_redacted(error: str, shown: str) -> None:
    r = run("chat", [], error=error)
    assert (r.ok, r.error) == (False, shown)


@pytest.mark.parametrize("seed", range(5))
def test_gap_stats_match_the_expanded_per_token_list(seed: int) -> None:
    rng = random.Random(seed)
    t, carrying = 0, []
    for _ in range(rng.randrange(2, 300)):
        t += rng.randrange(0, 80_000_000)
        carrying.append((t, float(rng.choice([1, 1, 1, 2, 3, 0.4, 7.6]))))
    expanded = []
    for (prev, _), (now, k) in pairwise(carrying):
        expanded += [(now - prev) / (max(k, 1.0) * 1e9)] * max(1, round(k))
    got = gap_stats(carrying)
    assert got is not None
    want = gap_fields(tuple(expanded))
    assert (got.p50_s, got.p99_s, got.max_s) == (approx(want["itl_p50_s"]), approx(want["itl_p99_s"]),
                                                 approx(want["itl_max_s"]))
    assert got.counts == want["itl_counts"] and got.sum_s == pytest.approx(want["itl_sum_s"])
