"""Daemon + a simulator exporting vLLM-shaped spans: measured stages in /api/v1/slos and /metrics, the
network stage against the simulator's injected delay, and probe spans (engine span as child) at a collector."""

from __future__ import annotations

import asyncio
import json
import statistics
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.otlp import Collector
from support.procs import (
    Proc,
    free_port,
    http_get,
    http_post,
    metric_value,
    sim_config,
    simulator,
    start_daemon,
    wait_until,
)

pytestmark = pytest.mark.e2e
DELAY_S = 0.050


class CollectorThread:
    """The collector stand-in on its own event loop, so the synchronous test can read what arrived."""

    def __init__(self) -> None:
        self.collector = Collector()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self.collector.start(), self.loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.collector.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="module")
def collector() -> Iterator[CollectorThread]:
    c = CollectorThread()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def rig(tmp: Path, collector: CollectorThread) -> Iterator[tuple[Proc, Proc]]:
    receiver = free_port()
    endpoint = f"http://127.0.0.1:{receiver}/v1/traces"
    with simulator(tmp, extra=("--otlp-traces-endpoint", endpoint, "--otlp-schedule-delay-ms", "100",
                               "--background-rps", "0")) as sim:
        assert http_post(f"{sim.url}/sim/faults", {"network_delay_s": DELAY_S})[0] == 200
        extra = (f"traces:\n  receiver: {{listen: '127.0.0.1:{receiver}'}}\n  hold: 5s\n"
                 f"  export: {{endpoint: '{collector.url}', sample_ratio: 1.0, forward_engine_spans: true}}\n")
        text = sim_config(sim, free_port(), tmp / "state", probe_interval="1s", extra=extra).replace(
            "    model: sim-llama-3-8b\n", "    model: sim-llama-3-8b\n    server_records: otlp\n", 1)
        daemon = start_daemon(tmp, text)
        try:
            yield sim, daemon
        finally:
            daemon.stop()


def _slo(daemon: Proc) -> dict[str, object]:
    status, body = http_get(f"{daemon.url}/api/v1/slos")
    assert status == 200
    return next((s for s in json.loads(body)["slos"] if s["name"] == "sim-latency"), {"stages": []})


def _request_stages(daemon: Proc) -> list[dict[str, object]]:
    return [s for s in _slo(daemon)["stages"] if s["source"] == "request" and s["p50"] is not None]  # type: ignore[index,union-attr]


def test_measured_stages_in_the_api_and_metrics(rig: tuple[Proc, Proc]) -> None:
    _, daemon = rig
    wait_until(lambda: {"network", "queue", "prefill", "decode"} <= {s["stage"] for s in _request_stages(daemon)},
               60, "measured stages in /api/v1/slos")
    stages = {(s["stage"], s["window"]): s for s in _request_stages(daemon)}
    for (stage, _), s in stages.items():
        assert s["p50"] >= 0 and s["p99"] >= 0, stage  # type: ignore[operator]
    # the estimate of a measured stage is not shown next to it
    assert not [s for s in _slo(daemon)["stages"] if s["stage"] == "network" and s["estimate"]]  # type: ignore[index]
    _, body = http_get(f"{daemon.url}/metrics")
    text = body.decode()
    assert metric_value(text, "sloguard_stage_latency_seconds",
                        {"slo": "sim-latency", "stage": "network", "source": "request", "quantile": "0.5"}) is not None
    assert (metric_value(text, "sloguard_request_stage_seconds_count", {"stage": "network", "source": "request"})
            or 0) >= 1
    assert (metric_value(text, "sloguard_trace_spans_total", {"outcome": "joined"}) or 0) >= 1
    assert metric_value(text, "sloguard_request_stage_negative_total") is None


def test_network_stage_matches_the_injected_delay_and_spans_nest(rig: tuple[Proc, Proc],
                                                                 collector: CollectorThread) -> None:
    spans = collector.collector.spans

    def pairs() -> list[tuple[float, float]]:
        engine = {s["trace_id"]: s["attributes"] for s in spans if s["name"] == "llm_request"}
        return [(c["attributes"]["sloguard.stage.network_s"], engine[c["trace_id"]]["sim.network_delay_s"])
                for c in spans if c["kind"] == 3 and "sloguard.stage.network_s" in c["attributes"]
                and c["trace_id"] in engine]

    wait_until(lambda: len(pairs()) >= 8, 60, "client spans with their engine spans at the collector")
    errors = [net - delay for net, delay in pairs()]
    assert min(net for net, _ in pairs()) >= 0
    # Within half the injected delay: tells a measured network stage from a missing (-50 ms) or double-counted
    # (+50 ms) one, whatever a busy CI machine adds (under stress-ng --cpu 2 the median error was 3.3 ms).
    # The accuracy claim (median within 2 ms, and the tail) is benchmarks/request_truth.py's.
    assert abs(statistics.median(errors)) < DELAY_S / 2, errors
    client = {s["trace_id"]: s for s in spans if s["kind"] == 3}
    for s in (s for s in spans if s["name"] == "llm_request" and s["trace_id"] in client):
        assert s["parent_id"] == client[s["trace_id"]]["span_id"]  # the engine span nests under the probe's
        assert {"first_token", "end"} <= set(client[s["trace_id"]]["events"])
