"""Probe CLIENT spans through the SDK's OTLP/HTTP exporter to a collector stand-in; sampling; bounded queue."""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading

import pytest
from support.otlp import Collector

from sloguard.config.traces import SpanExportSpec
from sloguard.model import ProbeResult
from sloguard.slo.model import SLO, Goodput, Objective, missed_slo
from sloguard.traces.client_spans import ClientSpans, attributes, sampled
from sloguard.traces.ids import probe_span_id


def result(ok: bool = True, **kw: object) -> ProbeResult:
    base: dict[str, object] = dict(ts=1_700_000_000.0, probe="p", target="t", model="m", api="chat", ok=ok,
                                   connect_s=0.001, ttft_s=0.05, e2e_s=0.4, tpot_s=0.01, output_tokens=32,
                                   prompt_tokens=64, prompt_bucket="short", trace_id=secrets.token_hex(16),
                                   network_s=0.002, record="otlp")
    base.update(kw)
    return ProbeResult(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("r", "ratio", "missed", "want"), [
    (result(ok=False, error="timeout after 1s"), 0.0, False, True),
    (result(), 0.0, True, True),
    (result(), 0.0, False, False),
    (result(), 1.0, False, True),
    (result(trace_id="0" * 18 + "00000000000001"), 0.001, False, True),
    (result(trace_id="f" * 32), 0.999, False, False),
])
def test_sampling(r: ProbeResult, ratio: float, missed: bool, want: bool) -> None:
    assert sampled(r, ratio, missed) is want


def test_ratio_sampling_is_close_to_its_share() -> None:
    n = sum(sampled(result(), 0.25, False) for _ in range(4000))
    assert 0.22 * 4000 < n < 0.28 * 4000


def test_missed_slo_reads_goodput_and_objective_thresholds() -> None:
    slos = (SLO("s", "t", goodput=Goodput(0.9, ttft=0.1)), SLO("o", "t", objectives=(Objective("e2e", 95, 1.0),)))
    assert not missed_slo(result(), slos)
    assert missed_slo(result(ttft_s=0.2), slos[:1])
    assert missed_slo(result(e2e_s=2.0), slos[1:])
    assert not missed_slo(result(ttft_s=0.2, target="other"), slos)


def test_attributes_use_genai_names_only_where_they_match() -> None:
    a = attributes(result())
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "m"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (64, 32)
    assert a["sloguard.ttft_s"] == 0.05 and a["sloguard.stage.network_s"] == 0.002
    assert not any("time_to_first" in k for k in a)  # the conventions' TTFC counts any chunk: not ours
    assert attributes(result(ok=False, error="http 503", status_code=503))["error.type"] == "http_503"


def test_spans_reach_a_collector_with_the_sent_ids() -> None:
    rs = [result(), result(ok=False, error="timeout after 1s", ttft_s=None)]

    async def body() -> list[dict[str, object]]:
        c = Collector()
        url = await c.start()
        spans = ClientSpans(SpanExportSpec(endpoint=url, sample_ratio=1.0))
        spans.offer(rs, lambda _: False)
        await asyncio.to_thread(spans.close, 10.0)
        await c.stop()
        assert spans.counts["exported"] == 2
        return c.spans

    got = {s["trace_id"]: s for s in asyncio.run(body())}
    for r in rs:
        s = got[r.trace_id]
        assert s["span_id"] == probe_span_id(r.trace_id) and s["kind"] == 3 and s["parent_id"] == ""
        assert s["start_ns"] == int(r.ts * 1e9)
    assert got[rs[0].trace_id]["events"] == ["first_token", "end"]
    assert got[rs[1].trace_id]["status"] == 2 and got[rs[1].trace_id]["events"] == ["end"]


def test_a_stuck_collector_never_blocks_and_drops_are_counted() -> None:
    with socket.socket() as srv:  # accepts connections, never answers
        srv.bind(("127.0.0.1", 0))
        srv.listen(64)
        url = f"http://127.0.0.1:{srv.getsockname()[1]}/v1/traces"
        spans = ClientSpans(SpanExportSpec(endpoint=url, sample_ratio=1.0, queue_size=100, timeout="2s"))
        spans.offer([result() for _ in range(2000)], lambda _: False)  # returns: the loop only appends
        assert spans.counts["dropped"] >= 2000 - 100 - 512
        stopper = threading.Thread(target=spans.close, args=(0.1,))
        stopper.start()
        stopper.join(5)
