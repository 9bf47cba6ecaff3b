"""Daemon + a simulator sending vLLM's in-band per-request `metrics`: measured stages without any tracing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
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
DELAY_S = 0.030


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    tmp: Path = tmp_path_factory.mktemp("inband")
    with simulator(tmp, extra=("--enable-per-request-metrics", "--background-rps", "0")) as sim:
        assert http_post(f"{sim.url}/sim/faults", {"network_delay_s": DELAY_S})[0] == 200
        proc = start_daemon(tmp, sim_config(sim, free_port(), tmp / "state"))  # server_records: inband (default)
        try:
            yield proc
        finally:
            proc.stop()


def _stages(daemon: Proc) -> dict[str, dict[str, float]]:
    _, body = http_get(f"{daemon.url}/api/v1/slos")
    slo = next((s for s in json.loads(body)["slos"] if s["name"] == "sim-latency"), {"stages": []})
    return {s["stage"]: s for s in slo["stages"] if s["source"] == "request" and s["window"] == "5m"
            and s["p50"] is not None}


def test_inband_metrics_give_measured_stages(daemon: Proc) -> None:
    wait_until(lambda: {"network", "queue", "prefill", "decode"} <= set(_stages(daemon)), 60, "in-band stages")
    stages = _stages(daemon)
    assert all(s["p50"] >= 0 and s["p99"] >= 0 for s in stages.values())
    assert stages["network"]["p50"] >= DELAY_S - 0.001  # the delay sits before the server's queue stamp
    _, body = http_get(f"{daemon.url}/metrics")
    assert (metric_value(body.decode(), "sloguard_request_records_total", {"target": "sim", "source": "inband"})
            or 0) >= 1
