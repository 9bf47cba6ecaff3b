"""RecordService: per-target modes, histograms and counters; the otlp-needs-a-receiver config check."""

from __future__ import annotations

from typing import Any

import pytest

from sloguard.config.load import ConfigError, parse_config
from sloguard.model import ProbeResult
from sloguard.traces.otlp import Decoded
from sloguard.traces.service import RecordService
from sloguard.traces.span import SpanData


def config(receiver: bool = True, **targets: str) -> Any:
    doc: dict[str, Any] = {
        "version": "sloguard/v1",
        "targets": [{"name": n, "api_url": "http://127.0.0.1:1", "engine": "vllm", "server_records": m}
                    for n, m in targets.items()],
        "probes": [{"name": f"p-{n}", "target": n} for n in targets],
    }
    if receiver:
        doc["traces"] = {"receiver": {"listen": "127.0.0.1:0"}, "hold": "2s"}
    return parse_config(doc)


def result(target: str, tid: str, **kw: object) -> ProbeResult:
    return ProbeResult(ts=0.0, probe=f"p-{target}", target=target, model="m", api="chat", ok=True, ttft_s=0.05,
                       trace_id=tid, **kw)  # type: ignore[arg-type]


def test_modes_route_results_and_metrics_show_them() -> None:
    svc = RecordService(config(a="otlp", b="inband", c="none"), lambda r: False)
    out = svc.finalise([result("a", "aa" * 16), result("b", "bb" * 16, record="inband", server_ttft_s=0.04,
                                                         queue_s=0.001, prefill_s=0.039),
                        result("c", "cc" * 16, record="inband", server_ttft_s=0.04)], now=0.0)
    assert [(r.target, r.record) for r in out] == [("b", "inband"), ("c", "")]
    assert out[0].network_s == pytest.approx(0.01)
    svc._on_spans(Decoded([SpanData("aa" * 16, "01" * 8, "llm_request", 0, 1, attrs={
        "gen_ai.latency.time_to_first_token": 0.045})], irrelevant=2, malformed=1))
    [a] = svc.finalise([], now=0.1)
    assert a.record == "otlp" and a.network_s == pytest.approx(0.005)
    text = "\n".join(str(s) for fam in svc.families() for s in fam.samples)
    for want in ("sloguard_request_stage_seconds_bucket", "'stage': 'network'", "'outcome': 'irrelevant'",
                 "'source': 'otlp'", "'source': 'inband'"):
        assert want in text


def test_held_results_come_back_after_the_hold() -> None:
    svc = RecordService(config(a="otlp"), lambda r: False)
    assert svc.finalise([result("a", "aa" * 16)], now=0.0) == []
    [r] = svc.finalise([], now=2.0)
    assert r.record == "" and svc.joiner.records == {("a", "missing"): 1}


def test_otlp_needs_the_receiver() -> None:
    with pytest.raises(ConfigError) as info:
        config(receiver=False, a="otlp")
    assert "targets[0].server_records: 'otlp' needs traces.receiver.listen" in info.value.errors[0]
