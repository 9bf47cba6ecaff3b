"""In-band records (vLLM per-request `metrics`, llama.cpp `timings`) pass from the stream into the result."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sloguard.probes.job import ProbeJob
from sloguard.probes.openai import decode_chat, decode_completion
from sloguard.probes.stream import Stamps, assemble
from sloguard.probes.workload import Prompt
from sloguard.traces.inband import inband_record
from sloguard.traces.join import Joiner

MS = 1_000_000
JOB = ProbeJob(name="p", target="t", api="chat", url="http://x", model="m")


def ev(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text},
                                                            "finish_reason": finish}]}


VLLM_USAGE = {"object": "chat.completion.chunk", "choices": [],
              "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
              "metrics": {"time_to_first_token_ms": 30.0, "generation_time_ms": 20.0, "queue_time_ms": 0.04,
                          "mean_itl_ms": 10.0, "tokens_per_second": 60.0}}
LLAMA_FINAL = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
               "timings": {"prompt_n": 9, "prompt_ms": 31.5, "prompt_per_token_ms": 3.5, "predicted_n": 3,
                           "predicted_ms": 21.0, "predicted_per_token_ms": 7.0}}


def stream(final: dict[str, Any]) -> list[tuple[int, bytes]]:
    return [(40 * MS, ev(chunk("a"))), (50 * MS, ev(chunk("b"))), (60 * MS, ev(chunk("c", "stop"))),
            (61 * MS, ev(final)), (62 * MS, b"data: [DONE]\n\n")]


@pytest.mark.parametrize(("final", "want"), [
    (VLLM_USAGE, {"queue_s": 0.04e-3, "prefill_s": 0.030, "server_decode_s": 0.020, "server_ttft_s": 0.03004}),
    (LLAMA_FINAL, {"queue_s": None, "prefill_s": 0.0315, "server_decode_s": 0.021, "server_ttft_s": None}),
])
def test_inband_record_reaches_the_result(final: dict[str, Any], want: dict[str, float | None]) -> None:
    r = assemble(JOB, Prompt("x", 9, "short"), "ab" * 16, 0.0, 200, Stamps(t0_ns=0), stream(final),
                 decode_chat, False, None)
    assert r.ok and r.record == "inband"
    assert {k: getattr(r, k) for k in want} == pytest.approx(want)
    [done] = Joiner().offer([(r, "inband", "auto")], now=0.0)
    assert done.network_s == (None if want["server_ttft_s"] is None else pytest.approx(0.040 - 0.03004))


def test_events_without_records_carry_none() -> None:
    assert decode_chat(json.dumps(chunk("a"))).record is None
    assert decode_completion(json.dumps({"choices": [{"text": "a"}], "timings": {"prompt_ms": "x"}})).record is None
    assert inband_record({"metrics": {"queue_time_ms": "x"}}) is None
