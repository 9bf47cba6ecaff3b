"""Stage breakdowns: measured before bounded, no part above its whole, never negative (captured pages too)."""

from __future__ import annotations

import dataclasses
import random

import pytest
from support.fixtures import captured_metrics_dir

from sloguard.model import Histogram, ProbeResult
from sloguard.slo.evaluate import evaluate
from sloguard.slo.model import SLO, is_good
from sloguard.slo.stages import PART_OF
from sloguard.sources.engines import normalise
from sloguard.sources.parse import parse_text
from sloguard.windows.probe import ProbeWindow

NOW = 1_000_000.0
CAPTURED = captured_metrics_dir()


class CapturedServer:
    """Server windows that return one captured page's histograms for every window."""

    def __init__(self, name: str) -> None:
        view = normalise(parse_text((CAPTURED / name).read_text()), "auto", "t", 0.0)
        (model,) = view.models.values()
        self.hists = dict(model.histograms)

    def histogram(self, target: str, model: str | None, signal: str, window: float, now: float) -> Histogram | None:
        return self.hists.get(signal)

    def span(self, target: str, signal: str, window: float, now: float) -> float:
        return window

    def finished(self, target: str, reasons: frozenset[str], window: float, now: float) -> float:
        return 0.0


def _probe(n: int, rng: random.Random, **fields: float | None) -> dict[str, ProbeWindow]:
    pw = ProbeWindow(86400.0 * 28)
    for i in range(n):
        ttft = rng.uniform(0.05, 0.12)
        r = ProbeResult(ts=NOW - i, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=ttft,
                        e2e_s=ttft + rng.uniform(0.2, 0.4), connect_s=0.0, head_s=ttft * rng.uniform(0.01, 0.2))
        pw.add(dataclasses.replace(r, **fields), is_good(r, None))
    return {"": pw}


def _whole_ok(stages: list) -> None:  # type: ignore[type-arg]
    by = {(s.stage, s.window, s.segment, s.source): s for s in stages}
    for s in stages:
        for v in (s.p50, s.p95, s.p99):
            assert v is not None and v >= 0.0, s
        whole_name = PART_OF.get(s.stage)
        wholes = [w for (n, win, seg, _), w in by.items() if n == whole_name and win == s.window and seg == s.segment]
        for w in wholes[:1] if s.source != "server" else wholes:
            for part, whole in ((s.p50, w.p50), (s.p95, w.p95), (s.p99, w.p99)):
                assert part is not None and whole is not None and part <= whole + 1e-12, (s, w)


@pytest.mark.parametrize("page", ["vllm-v1-dynamo-2026-01.txt", "sglang-dynamo-2026-01.txt"])
def test_probe_slo_on_a_captured_server_no_part_above_its_whole(page: str) -> None:
    """The real vLLM capture read queue p95 285 ms and prefill p95 480 ms against probe TTFT p95 ~120 ms."""
    slo = SLO("s", "t")
    st = evaluate(slo, _probe(200, random.Random(1)), NOW, CapturedServer(page))
    _whole_ok(list(st.stages))
    ttft = next(s for s in st.stages if s.stage == "ttft" and s.window == 300.0)
    queue = next(s for s in st.stages if s.stage == "queue" and s.window == 300.0)
    assert queue.source == "server" and queue.bounded and queue.resolution
    assert queue.p95 is not None and ttft.p95 is not None and queue.p95 <= min(2e-4 if "vllm" in page else 0.04,
                                                                                ttft.p95)
    net = next(s for s in st.stages if s.stage == "network" and s.window == 300.0)
    assert net.source == "probe" and not net.estimate and net.resolution == ()


def test_server_slo_on_the_vllm_capture_prefill_capped_by_its_ttft() -> None:
    slo = SLO("s", "t", source="server")
    st = evaluate(slo, None, NOW, CapturedServer("vllm-v1-dynamo-2026-01.txt"))
    _whole_ok(list(st.stages))
    prefill = next(s for s in st.stages if s.stage == "prefill")
    ttft = next(s for s in st.stages if s.stage == "ttft")
    assert prefill.p95 == pytest.approx(ttft.p95) and prefill.bounded  # histogram_quantile said 0.48 > 0.475


def test_measured_request_stages_replace_estimates_and_head() -> None:
    slo = SLO("s", "t")
    probe = _probe(50, random.Random(2), record="inband", network_s=0.003, queue_s=0.001, prefill_s=0.02,
                   server_decode_s=0.2)
    st = evaluate(slo, probe, NOW, CapturedServer("vllm-v1-dynamo-2026-01.txt"))
    five = [s for s in st.stages if s.window == 300.0]
    assert {(s.stage, s.source) for s in five} >= {("network", "request"), ("queue", "request"),
                                                   ("prefill", "request"), ("decode", "request")}
    assert not [s for s in five if s.source == "server"]  # nothing estimated where measured
    assert [s.p95 for s in five if s.stage == "network"] == [pytest.approx(0.003)]


@pytest.mark.parametrize("seed", range(5))
def test_random_traffic_never_negative_never_above_whole(seed: int) -> None:
    rng = random.Random(seed)
    st = evaluate(SLO("s", "t"), _probe(300, rng), NOW, CapturedServer("vllm-v1-dynamo-2026-01.txt"))
    _whole_ok(list(st.stages))
