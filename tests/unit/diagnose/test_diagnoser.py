"""The daemon's diagnosis over real SLO and server windows, on an injected timeline (no sleeps)."""

from __future__ import annotations

import random

from prometheus_client.metrics_core import Metric

from sloguard.alerts.annotate import annotate_all
from sloguard.alerts.engine import Alert, Transition
from sloguard.alerts.notifiers.slack import _alert_block
from sloguard.clock import FakeClock
from sloguard.config.load import load_config_text
from sloguard.diagnose.service import Diagnoser
from sloguard.model import Histogram, ModelView, ProbeResult, Sample, ServerView
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import slos_from_config
from sloguard.windows.server import ServerWindows

CONFIG = """
version: sloguard/v1
targets: [{name: t, engine: vllm, metrics_url: "http://127.0.0.1:1/metrics"}]
slos:
  - {name: chat, target: t, objectives: [{metric: ttft, percentile: 95, threshold: 500ms}]}
diagnose: {window: 20s, baseline: 10m}
"""


def _result(ts: float, rng: random.Random, queue: float) -> ProbeResult:
    prefill, network = rng.uniform(0.08, 0.1), rng.uniform(0.002, 0.003)
    ttft = network + queue + prefill
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=ttft, e2e_s=ttft + 0.3,
                       tpot_s=0.015, connect_s=0.0, record="inband", server_ttft_s=queue + prefill, network_s=network,
                       queue_s=queue, prefill_s=prefill, server_decode_s=0.3, head_s=network)


def _scrape(ts: float, n: int, waiting: float) -> ServerView:
    mv = ModelView("m", histograms={"queue": Histogram(((0.3, n), (float("inf"), n)), n, 0.0)},
                   gauges={"requests_waiting": waiting, "requests_running": 4.0, "kv_cache_usage_ratio": 0.3},
                   counters={"prompt_tokens": 300.0 * n, "preemptions": 0.0}, finished_by_reason={"stop": float(n)})
    return ServerView("t", "vllm", ts, {"m": mv})


def _finished(now: float) -> int:
    """Return the requests finished by `now`: 3 a second, 9 a second from 1040 to 1070 (a surge)."""
    return int(now) * 3 + 6 * int(min(max(now - 1040.0, 0.0), 30.0))


def _run(d: Diagnoser, engine: SLOEngine, server: ServerWindows, start: float, seconds: int, queue: float,
         waiting: float, rng: random.Random) -> None:
    for i in range(seconds):
        now = start + i
        engine.add_probe_results([_result(now - 0.5, rng, queue), _result(now - 0.25, rng, queue)])
        server.add(_scrape(now, _finished(now), waiting))
        d.step(now, engine.evaluate(now, server), engine, server, [])


def _samples(fams: list[Metric]) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    for f in fams:
        for s in f.samples:
            out.setdefault(s.name, []).append(Sample(s.name, s.labels, s.value))
    return out


def test_learns_while_healthy_then_names_the_cause() -> None:
    cfg = load_config_text(CONFIG)
    clock = FakeClock(1000.0)
    engine, server, d = SLOEngine(slos_from_config(cfg), clock), ServerWindows(), Diagnoser(cfg)
    rng = random.Random(1)
    _run(d, engine, server, 1000.0, 40, queue=0.005, waiting=0.0, rng=rng)
    v = d.verdicts["chat"]
    assert (v.stage, v.cause) == ("none", "none")
    fams = _samples(d.families())
    assert [s.labels for s in fams["sloguard_bottleneck_info"]] == [{"slo": "chat", "stage": "none", "cause": "none"}]
    assert {s.labels["stage"] for s in fams["sloguard_stage_excess_seconds"]} == {"network", "queue", "prefill",
                                                                                  "decode"}
    assert d.annotations({"slo": "chat"})["diagnosis"].startswith("none: no objective breached over the last 20s")
    # a surge: 3x the requests, and they wait 1.5 s in the queue
    _run(d, engine, server, 1040.0, 30, queue=1.5, waiting=12.0, rng=rng)
    v = d.verdicts["chat"]
    assert (v.stage, v.cause) == ("queue", "capacity") and v.confidence > 0.5
    ann = d.annotations({"slo": "chat", "alertname": "X"})
    assert ann["diagnosis_cause"] == "capacity" and "→ capacity: add replicas" in ann["diagnosis"]
    assert "requests_waiting" in ann["diagnosis_evidence"] and d.annotations({"alertname": "Other"}) == {}
    excess = {s.labels["stage"]: s.value for s in _samples(d.families())["sloguard_stage_excess_seconds"]}
    assert excess["queue"] > 1.0 and excess["network"] < 0.01
    doc = d.decorate({"slos": [{"name": "chat"}, {"name": "gone"}]})
    assert doc["slos"][0]["diagnosis"]["cause"] == "capacity" and doc["slos"][1]["diagnosis"] is None
    seen = doc["slos"][0]["diagnosis"]["signals"]  # what the verdict was decided from, with the baselines
    assert seen["requests_waiting"]["value"] == 12.0 and seen["requests_waiting"]["baseline"] == 0.0


def test_a_breach_easing_out_of_the_slos_window_is_not_recent_and_baselines_learn_again() -> None:
    """After 30 s of a queue the last 20 s are healthy again; the SLO's 5-min p95 still holds the slow requests."""
    cfg = load_config_text(CONFIG)
    engine, server, d = SLOEngine(slos_from_config(cfg), FakeClock(1000.0)), ServerWindows(), Diagnoser(cfg)
    rng = random.Random(2)
    _run(d, engine, server, 1000.0, 40, queue=0.005, waiting=0.0, rng=rng)
    _run(d, engine, server, 1040.0, 30, queue=1.5, waiting=12.0, rng=rng)
    learned = d._baselines["chat"].span("requests_waiting")
    _run(d, engine, server, 1070.0, 25, queue=0.005, waiting=0.0, rng=rng)
    v = d.verdicts["chat"]
    assert (v.stage, v.cause) == ("none", "unknown") and v.breach is not None and not v.breach.recent
    assert v.lever.startswith("no stage to locate: it misses over the SLO's window")
    assert d.annotations({"slo": "chat"})["diagnosis"].startswith("p95 ttft > 500ms over the SLO's window")
    after = d._baselines["chat"].span("requests_waiting")
    assert learned is not None and after is not None and after > learned  # the diagnosis window is healthy again


def test_disabled_and_reconfigured() -> None:
    cfg = load_config_text(CONFIG)
    d = Diagnoser(load_config_text(CONFIG.replace("window: 20s,", "enabled: false, window: 20s,")))
    engine, server = SLOEngine(slos_from_config(cfg), FakeClock(0.0)), ServerWindows()
    d.step(10.0, engine.evaluate(10.0, server), engine, server, [])
    assert d.verdicts == {} and d.json("chat") is None
    d.reconfigure(cfg)
    d.step(11.0, engine.evaluate(11.0, server), engine, server, [])
    assert d.verdicts["chat"].cause == "none"  # nothing breached without data: never a guess


def test_alerts_and_slack_carry_the_verdict() -> None:
    alert = Alert("SLOBurn", (("alertname", "SLOBurn"), ("severity", "page"), ("slo", "chat")),
                  (("summary", "burning"),), "firing", 0.0, 20.0, fired_at=0.0)
    extra = {"diagnosis": "p95 ttft 2.4s > 1s — queue → capacity: add replicas", "diagnosis_evidence": "a ✓\nb ✓"}
    active, events = annotate_all({"fp": alert}, [Transition("firing", alert)], lambda labels: extra)
    ann = dict(events[0].alert.annotations)
    assert ann["summary"] == "burning" and ann["diagnosis"] == extra["diagnosis"]
    assert dict(active["fp"].annotations)["diagnosis_evidence"] == "a ✓\nb ✓"
    text = str(_alert_block(events[0].alert))
    assert "Where / why:* p95 ttft 2.4s &gt; 1s" in text and "a ✓\\nb ✓" in text  # mrkdwn-escaped, lines kept
