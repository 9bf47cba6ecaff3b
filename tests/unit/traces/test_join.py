"""Join state machine: held results, early/late/duplicate/foreign spans, bounds, negative stages (no sleeps)."""

from __future__ import annotations

import pytest

from sloguard.model import ProbeResult
from sloguard.traces.join import Joiner
from sloguard.traces.span import SpanData

TID = "0af7651916cd43dd8448eb211c80319c"
VLLM = {"gen_ai.latency.time_to_first_token": 0.040, "gen_ai.latency.time_in_queue": 0.001,
        "gen_ai.latency.time_in_model_prefill": 0.035, "gen_ai.latency.time_in_model_decode": 0.3}


def result(tid: str = TID, ttft: float = 0.052, ok: bool = True, **kw: object) -> ProbeResult:
    return ProbeResult(ts=0.0, probe="p", target="t", model="m", api="chat", ok=ok, ttft_s=ttft, e2e_s=0.4,
                       trace_id=tid, **kw)  # type: ignore[arg-type]


def span(tid: str = TID, sid: str = "00f067aa0ba902b7", **attrs: float) -> SpanData:
    return SpanData(tid, sid, "llm_request", 0, 1, attrs={**VLLM, **attrs})


def test_span_after_result_joins_and_releases_at_once() -> None:
    j = Joiner(hold=10.0)
    assert j.offer([(result(), "otlp", "vllm")], now=0.0) == []
    assert j.pending == 1
    [r] = j.add([span()], now=0.5)
    assert (r.record, r.queue_s, r.prefill_s, r.server_decode_s) == ("otlp", 0.001, 0.035, 0.3)
    assert r.network_s == pytest.approx(0.012)
    assert j.pending == 0 and j.spans["joined"] == 1 and j.records == {("t", "otlp"): 1}


def test_span_before_result_waits_as_orphan() -> None:
    j = Joiner()
    assert j.add([span()], now=0.0) == [] and j.orphans == 1
    [r] = j.offer([(result(), "otlp", "vllm")], now=0.2)
    assert r.record == "otlp" and j.orphans == 0


def test_no_span_within_hold_releases_without_stages() -> None:
    j = Joiner(hold=10.0)
    j.offer([(result(), "otlp", "vllm")], now=0.0)
    assert j.due(9.9) == []
    [r] = j.due(10.0)
    assert r.record == "" and r.network_s is None and j.records == {("t", "missing"): 1}


def test_late_and_duplicate_spans_are_counted_not_joined() -> None:
    j = Joiner()
    j.offer([(result(), "otlp", "vllm")], now=0.0)
    j.add([span()], now=0.1)
    assert j.add([span()], now=0.2) == []
    assert j.spans["late"] == 1
    j.offer([(result("11" * 16), "otlp", "sglang")], now=0.0)  # multi-span engine: held until its final span
    j.add([SpanData("11" * 16, "01" * 8, "prefill_forward", 0, 10)], now=0.1)
    j.add([SpanData("11" * 16, "01" * 8, "prefill_forward", 0, 10)], now=0.1)
    assert j.spans["duplicate"] == 1


def test_foreign_spans_expire_and_a_flood_stays_bounded() -> None:
    j = Joiner(orphan_ttl=3.0, max_orphans=100)
    j.add([span(f"{i:032x}") for i in range(1, 1001)], now=0.0)
    assert j.orphans == 100 and j.spans["overflow"] == 900
    j.due(3.0)
    assert j.orphans == 0 and j.spans["foreign"] == 100


def test_negative_network_is_dropped_and_counted() -> None:
    j = Joiner()
    j.offer([(result(ttft=0.030), "otlp", "vllm")], now=0.0)
    [r] = j.add([span()], now=0.1)
    assert r.network_s is None and r.queue_s == 0.001
    assert j.negative == {("t", "network"): 1}


@pytest.mark.parametrize(("mode", "record"), [("inband", "inband"), ("none", "")])
def test_inband_and_none_release_at_once(mode: str, record: str) -> None:
    j = Joiner()
    r = result(record="inband", server_ttft_s=0.036, queue_s=0.001, prefill_s=0.035)
    [out] = j.offer([(r, mode, "vllm")], now=0.0)
    assert out.record == record
    assert out.network_s == (pytest.approx(0.016) if record else None)


def test_failed_results_are_not_held() -> None:
    j = Joiner()
    [r] = j.offer([(result(ok=False, error="timeout after 1s"), "otlp", "vllm")], now=0.0)
    assert not r.ok and j.pending == 0 and j.records == {}


def test_flush_releases_everything() -> None:
    j = Joiner()
    j.offer([(result(f"{i:032x}"), "otlp", "vllm") for i in range(1, 4)], now=0.0)
    assert len(j.flush()) == 3 and j.pending == 0


def test_a_flood_cannot_evict_a_probes_early_span() -> None:
    from sloguard.traces.ids import probe_span_id

    j = Joiner(orphan_ttl=3.0, max_orphans=100)
    ours = SpanData(TID, "00f067aa0ba902b7", "llm_request", 0, 1, parent_id=probe_span_id(TID), attrs=VLLM)
    j.add([ours], now=0.0)
    j.add([span(f"{i:032x}") for i in range(1, 1001)], now=0.1)  # other traffic's spans, no probe parent
    assert j.spans["overflow"] == 900
    [r] = j.offer([(result(), "otlp", "vllm")], now=0.2)
    assert r.record == "otlp" and r.network_s == pytest.approx(0.012)
