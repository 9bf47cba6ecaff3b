"""Issue 16 against the real simulator and daemon: two budgets, censored latencies, budgets over the window.

Each test starts a fresh simulator and daemon (1 probe a second, 900 ms timeout, a 1-day SLO with
goodput and error_rate), injects one fault class and reads what the daemon exports and fires:
- a latency fault without failures spends the latency budget and pages on it; availability stays whole;
- requests that time out after their first token keep TTFT measured (not absent, not censored);
- requests that time out before it report p95 TTFT as a lower bound at the timeout, objective missed;
- two minutes of 10% errors leave > 90% of the 1-day budget; a sustained outage still pages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.procs import Proc, free_port, http_get, http_post, metric_value, simulator, start_daemon, wait_until

pytestmark = pytest.mark.e2e
TIMEOUT = 0.9
UX = {"slo": "ux"}
CONFIG = """\
version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
targets:
  - {{name: sim, engine: vllm, metrics_url: "{sim}/metrics", api_url: "{sim}", model: sim-llama-3-8b,
     scrape_interval: 1s, scrape_timeout: 900ms}}
probes:
  - {{name: chat, target: sim, api: chat, interval: 1s, timeout: 900ms, max_tokens: 8, ignore_eos: true,
     prompts: [{{tokens: 64}}]}}
slos:
  - name: ux
    target: sim
    objectives: [{{metric: ttft, percentile: 95, threshold: 500ms}}]
    goodput: {{ttft: 500ms, target: 0.99}}
    error_rate: {{target: 0.99}}
    error_budget_window: 1d
notifiers:
  - {{name: console, type: log, group_wait: 0s}}
"""


started: dict[int, float] = {}  # daemon port -> when it was started


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Proc, Proc]]:
    # No background traffic: its long prefill steps would add up to ~0.4 s to a probe's decode at random.
    with simulator(tmp_path, extra=("--background-rps", "0")) as sim:
        port, now = free_port(), time.time()
        daemon = start_daemon(tmp_path, CONFIG.format(port=port, state=tmp_path / "state", sim=sim.url))
        started[port] = now
        try:
            wait_until(lambda: _value(daemon, "sloguard_slo_window_requests", window="1m") is not None, 30,
                       "the first evaluated probe results")
            yield sim, daemon
        finally:
            daemon.stop()


def _value(daemon: Proc, name: str, **labels: str) -> float | None:
    return metric_value(http_get(f"{daemon.url}/metrics")[1].decode(), name, {**UX, **labels})


def _firing(daemon: Proc) -> list[dict[str, str]]:
    doc = json.loads(http_get(f"{daemon.url}/debug/alerts")[1])
    return [dict(a["labels"]) for a in doc["active"] if a["state"] == "firing"]


def _fault(sim: Proc, **faults: object) -> None:
    assert http_post(f"{sim.url}/sim/faults", faults)[0] in (200, 204)


def test_latency_fault_pages_the_latency_budget_only(pair: tuple[Proc, Proc]) -> None:
    sim, daemon = pair
    wait_until(lambda: (_value(daemon, "sloguard_slo_window_requests", window="1m") or 0) >= 10, 30,
               "a healthy baseline of 10 requests")
    _fault(sim, stall_first_token_s=0.52)  # TTFT ~0.55 s > 500 ms; the whole answer (~0.64 s) within 900 ms
    took = wait_until(lambda: any(a.get("sli") == "latency" and a["severity"] == "page" for a in _firing(daemon)),
                      90, "a latency page")
    # Availability is spent by failed requests only: none on an idle host (the fault's answers end in time), and
    # on a busy one exactly those the daemon counted as failed (a host that held one past the 900 ms timeout)
    seen: list[tuple[float, float, float | None]] = []

    def availability() -> bool:  # one scrape; the last requests drained may wait for the next evaluation
        text = http_get(f"{daemon.url}/metrics")[1].decode()
        failed = sum(x.value for fam in text_string_to_metric_families(text) for x in fam.samples
                     if x.name == "sloguard_probe_requests_total" and x.labels.get("outcome") != "success")
        bad = metric_value(text, "sloguard_slo_window_bad_requests", {**UX, "sli": "availability", "window": "1h"})
        seen.append((failed, bad or 0.0,
                     metric_value(text, "sloguard_slo_error_budget_remaining_ratio", {**UX, "sli": "availability"})))
        return seen[-1][1] == failed and (seen[-1][2] == 1.0) == (failed == 0)

    try:
        wait_until(availability, 10, "availability spent by the failed requests only")
    except AssertionError as e:
        raise AssertionError(f"{e}; (failed, bad, remaining): {seen[-3:]}") from None
    if seen[-1][0] == 0:
        assert not any(a.get("sli") == "availability" for a in _firing(daemon))
    left = _value(daemon, "sloguard_slo_error_budget_remaining_ratio", sli="latency")
    assert left is not None and 0.5 < left < 1.0
    burn = _value(daemon, "sloguard_slo_burn_rate", sli="latency", window="5m")
    print(f"latency page {took:.1f}s after the fault; latency budget left {left:.4f}; 5m burn {burn}")


def test_timeouts_after_the_first_token_keep_ttft_measured(pair: tuple[Proc, Proc]) -> None:
    sim, daemon = pair
    _fault(sim, latency_multiplier=10.0)  # first token ~0.33 s, the 8th ~1.2 s: every request times out

    def all_timed_out() -> bool:
        failed = _value(daemon, "sloguard_slo_window_bad_requests", sli="availability", window="1m")
        requests = _value(daemon, "sloguard_slo_window_requests", window="1m")
        return failed is not None and requests is not None and failed >= 10 and failed >= 0.5 * requests

    wait_until(all_timed_out, 60, "requests timing out")
    text = http_get(f"{daemon.url}/metrics")[1].decode()
    p95 = metric_value(text, "sloguard_slo_quantile_seconds", {**UX, "metric": "ttft", "quantile": "0.95",
                                                               "window": "1m"})
    censored = metric_value(text, "sloguard_slo_censored_requests", {**UX, "metric": "ttft", "window": "1m"})
    # measured, from the requests that timed out after their first token, as the daemon measured each
    ttfts = [r["ttft_s"] for r in json.loads(http_get(f"{daemon.url}/debug/probes")[1])
             if not r["ok"] and str(r.get("error")).startswith("timeout") and r.get("ttft_s") is not None]
    assert p95 is not None and ttfts and min(ttfts) <= p95, (p95, sorted(ttfts))
    if not censored:  # a busy host may hold some past the timeout before their first token: those are censored
        assert p95 <= max(ttfts), (p95, sorted(ttfts))
        assert metric_value(text, "sloguard_slo_quantile_censored", {**UX, "metric": "ttft", "quantile": "0.95",
                                                                     "window": "1m"}) == 0.0


def test_timeouts_before_the_first_token_report_a_lower_bound(pair: tuple[Proc, Proc]) -> None:
    sim, daemon = pair
    _fault(sim, stall_first_token_s=2.0)  # no token within the 900 ms timeout

    def missed() -> bool:
        return _value(daemon, "sloguard_slo_objective_compliance", metric="ttft", quantile="0.95", window="1m") == 0.0

    wait_until(missed, 60, "a missed p95 TTFT")
    wait_until(lambda: (_value(daemon, "sloguard_slo_censored_requests", metric="ttft", window="1m") or 0) >= 10, 30,
               "ten requests censored")
    p95 = _value(daemon, "sloguard_slo_quantile_seconds", metric="ttft", quantile="0.95", window="1m")
    # Among the times those requests ran, as the daemon measured each (t0 → the timeout): the 900 ms timeout less
    # connection set-up and request building, plus however late a busy host fired the timeout
    ran = [r["elapsed_s"] for r in json.loads(http_get(f"{daemon.url}/debug/probes")[1])
           if not r["ok"] and str(r.get("error")).startswith("timeout") and r.get("ttft_s") is None]
    assert p95 is not None and ran and min(ran) <= p95 <= max(ran), (p95, sorted(ran))
    # the run is over the 500 ms objective already: missed on measured values, not "because cut short"
    assert _value(daemon, "sloguard_slo_quantile_censored", metric="ttft", quantile="0.95", window="1m") == 0.0
    slos = json.loads(http_get(f"{daemon.url}/api/v1/slos")[1])["slos"]
    (obj,) = [o for o in slos[0]["objectives"] if o["window"] == "1m"]
    assert obj["censored_count"] >= 10 and obj["compliant"] is False and not obj["censored"]
    assert obj["upper"] is None  # a cut-short request holds the p95 rank: unbounded above


def test_one_day_budget_after_two_minutes_of_10pct_errors_then_an_outage_pages(pair: tuple[Proc, Proc]) -> None:
    sim, daemon = pair
    _fault(sim, error_rate=0.1)
    time.sleep(120)
    text = http_get(f"{daemon.url}/metrics")[1].decode()
    read = time.time()
    left = metric_value(text, "sloguard_slo_error_budget_remaining_ratio", {**UX, "sli": "availability"})
    coverage = metric_value(text, "sloguard_slo_window_coverage_ratio", {**UX, "sli": "availability"})
    assert left is not None and left > 0.9, left  # ~12 bad of the ~864 a day at 1 probe/s allows
    # the data spans at least its requests one probe interval (1 s) apart (a busy host skips ticks, never doubles
    # them; the last two may not be evaluated yet) and at most the daemon's life
    sent = sum(x.value for fam in text_string_to_metric_families(text) for x in fam.samples
               if x.name == "sloguard_probe_requests_total")  # every outcome
    assert coverage is not None and (sent - 2) / 86400 <= coverage <= (read - started[daemon.port]) / 86400, (
        coverage * 86400, sent, read - started[daemon.port])
    _fault(sim, error_rate=1.0)
    took = wait_until(lambda: any(a.get("sli") == "availability" and a["severity"] == "page"
                                  for a in _firing(daemon)), 90, "an availability page on the outage")
    print(f"after 2 min of 10% errors: {left:.2%} of the 1d budget left; outage paged in {took:.1f}s")
