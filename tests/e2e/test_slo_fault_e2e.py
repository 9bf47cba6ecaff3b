"""A latency fault in the simulator moves p95 TTFT, goodput and the 1h burn rate of the running daemon.

How fast (within two evaluations of the first faulted result) is measured by benchmarks/fault_reaction.py:
a wall-clock budget here failed on a busy CI machine, where it says nothing about sloguard.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

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
SLO = {"slo": "sim-latency"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, Proc]]:
    tmp = tmp_path_factory.mktemp("slofault")
    with simulator(tmp) as sim:
        # Without error_rate the error budget is spent by requests that are not good, so latency burns it.
        text = sim_config(sim, free_port(), tmp / "state").replace("    error_rate: {target: 0.99}\n", "")
        daemon = start_daemon(tmp, text)
        yield sim, daemon
        daemon.stop()


def _read(d: Proc) -> tuple[float | None, float | None, float | None]:
    text = http_get(f"{d.url}/metrics")[1].decode()
    p95 = metric_value(text, "sloguard_slo_quantile_seconds",
                       {**SLO, "metric": "ttft", "quantile": "0.95", "window": "5m"})
    goodput = metric_value(text, "sloguard_slo_goodput_ratio", {**SLO, "window": "5m"})
    burn = metric_value(text, "sloguard_slo_burn_rate", {**SLO, "window": "1h"})
    return p95, goodput, burn


def test_latency_fault_moves_ttft_goodput_and_burn_rate(pair: tuple[Proc, Proc]) -> None:
    sim, daemon = pair
    wait_until(lambda: None not in _read(daemon) and (_read(daemon)[1] or 0) > 0.9, 40,
               "baseline: SLO series with healthy goodput")
    time.sleep(8)  # a baseline of ~8 healthy requests, so one slow request moves p95
    p95_0, good_0, burn_0 = _read(daemon)
    assert p95_0 is not None and good_0 is not None and burn_0 is not None
    assert p95_0 < 0.5, f"baseline p95 TTFT {p95_0} should meet the 500ms objective"
    assert http_post(f"{sim.url}/sim/faults", {"stall_first_token_s": 0.55})[0] in (200, 204)
    try:
        def moved() -> bool:
            p95, good, burn = _read(daemon)
            return (p95 is not None and p95 > 0.5 and good is not None and good < good_0
                    and burn is not None and burn > burn_0)

        took = wait_until(moved, 20, "p95 TTFT up, goodput down, 1h burn rate up", step=0.1)
    finally:
        http_post(f"{sim.url}/sim/faults", method="DELETE")
    print(f"fault -> SLO series moved in {took:.2f}s; before: p95={p95_0:.3f}s goodput={good_0:.3f} "
          f"burn1h={burn_0:.3f}; after: {_read(daemon)}")
