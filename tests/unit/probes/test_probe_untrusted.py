"""Peer numbers in a stream: a token count of 2^63, -1, NaN or a string invalidates that one result (counted,
never stored), the token counters never go down or NaN, and the probe process's rejections reach the daemon's."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from typing import Any

import pytest

from sloguard import untrusted
from sloguard.model import ProbeResult
from sloguard.probes.bounds import checked
from sloguard.probes.job import ProbeJob
from sloguard.probes.metrics import ProbeMetrics
from sloguard.probes.openai import decode_chat
from sloguard.probes.stream import Stamps, assemble
from sloguard.probes.tgi import decode_tgi
from sloguard.probes.worker import ProbeWorker, _Runner
from sloguard.probes.workload import Prompt

MS = 1_000_000
JOB = ProbeJob(name="p", target="t", api="chat", url="http://127.0.0.1:1", model="m")


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    untrusted.REJECTIONS.clear()
    yield
    untrusted.REJECTIONS.clear()
    untrusted.forward(None)


def stream(usage: str) -> list[tuple[int, bytes]]:
    content = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
    end = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    tail = b'data: {"choices":[],"usage":' + usage.encode() + b"}\n\ndata: [DONE]\n\n"
    return [(10 * MS, content), (20 * MS, content), (30 * MS, end), (31 * MS, tail)]


def run(usage: str) -> ProbeResult:
    return assemble(JOB, Prompt("x", 8, "short"), "0" * 32, 1.0, 200, Stamps(t0_ns=1), stream(usage), decode_chat,
                    False, None)


@pytest.mark.parametrize(("usage", "reason"), [
    ('{"completion_tokens": 9223372036854775808}', "out_of_range"),
    ('{"completion_tokens": -9999464}', "out_of_range"),
    ('{"completion_tokens": NaN}', "not_finite"),
    ('{"completion_tokens": 1e999}', "not_finite"),
    ('{"completion_tokens": "3"}', "not_a_number"),
    ('{"completion_tokens": 3, "prompt_tokens": 2.5}', "not_an_integer"),
    ('"lots"', "not_an_object"),
])
def test_a_token_count_out_of_range_invalidates_the_result(usage: str, reason: str) -> None:
    r = run(usage)
    assert not r.ok and r.error is not None and r.error.startswith("invalid answer: ")
    assert r.output_tokens is None and r.tpot_s is None
    assert untrusted.REJECTIONS.snapshot() == {("probe", reason): 1}


def test_a_valid_count_still_gives_tpot() -> None:
    r = run('{"completion_tokens": 3, "prompt_tokens": 9}')
    assert r.ok and r.output_tokens == 3 and r.tpot_s is not None and not untrusted.REJECTIONS.snapshot()


@pytest.mark.parametrize("data", [
    '{"token": {"text": "a"}, "details": {"generated_tokens": 1e30}, "generated_text": "a"}',
    '{"token": {"text": "a"}, "details": [1]}',
])
def test_tgi_details_are_checked(data: str) -> None:
    with pytest.raises(untrusted.Invalid):
        decode_tgi(data)


@pytest.mark.parametrize("metrics", ['{"queue_time_ms": NaN, "time_to_first_token_ms": 3}',
                                     '{"queue_time_ms": -5, "time_to_first_token_ms": 3}',
                                     '{"queue_time_ms": 1e300, "time_to_first_token_ms": 3}'])
def test_an_in_band_record_out_of_range_is_invalid(metrics: str) -> None:
    with pytest.raises(untrusted.Invalid):
        decode_chat('{"choices": [], "usage": {"completion_tokens": 2}, "metrics": ' + metrics + "}")


def test_counters_never_go_down_or_nan() -> None:
    m = ProbeMetrics()
    base = {"ts": 1.0, "probe": "p", "target": "t", "model": "m", "api": "chat", "ok": True, "ttft_s": 0.1}
    for tokens in (5, -9_999_464, 2**63, 7):
        m.observe(ProbeResult(**base, output_tokens=tokens))  # type: ignore[arg-type]
    totals = [s.value for fam in m.families(2.0) for s in fam.samples if s.name == "sloguard_probe_output_tokens_total"]
    assert totals == [12]


@pytest.mark.parametrize(("field", "value"), [("output_tokens", 2**63), ("queue_s", float("nan")),
                                              ("server_ttft_s", float("inf")), ("prefill_s", -1.0)])
def test_the_daemon_gate_clears_a_value_out_of_range(field: str, value: Any) -> None:
    r = ProbeResult(ts=1.0, probe="p", target="t", model="m", api="chat", ok=True, **{field: value})
    got = checked(r)
    assert got is not None and getattr(got, field) is None
    assert sum(untrusted.REJECTIONS.snapshot().values()) == 1


def test_the_daemon_gate_drops_a_result_with_a_broken_timestamp() -> None:
    assert checked(ProbeResult(ts=float("nan"), probe="p", target="t", model="m", api="chat", ok=True)) is None


def test_rejections_in_the_probe_process_reach_the_daemons_counter() -> None:
    worker = ProbeWorker([])
    cmd, _ = mp.Pipe()
    untrusted.forward(_Runner(cmd, worker._results_child, parent_pid=0).report_invalid)  # as worker.main does
    untrusted.reject("probe", "out_of_range", "usage.completion_tokens")
    assert untrusted.REJECTIONS.snapshot() == {}  # not counted in the probe process
    untrusted.forward(None)
    for _ in range(100):
        worker.drain()
        if untrusted.REJECTIONS.snapshot():
            break
        worker._results.poll(0.05)
    assert untrusted.REJECTIONS.snapshot() == {("probe", "out_of_range"): 1}
