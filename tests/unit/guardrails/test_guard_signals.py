"""Guardrail signals: tables for the pure maths, then GuardSignals over scrapes fed through ServerWindows."""

from __future__ import annotations

import pytest

from sloguard.config.spec import Config
from sloguard.guardrails import signals
from sloguard.guardrails.server import GuardSignals
from sloguard.model import ModelView, Sample, ServerView
from sloguard.windows.server import ServerWindows


@pytest.mark.parametrize(("part", "whole", "expected"), [
    (30.0, 60.0, 0.5), (0.0, 10.0, 0.0), (5.0, 0.0, None), (None, 10.0, None), (3.0, None, None),
])
def test_ratio(part: float | None, whole: float | None, expected: float | None) -> None:
    assert signals.ratio(part, whole) == expected


@pytest.mark.parametrize(("accepted", "drafts", "expected"), [
    (36864.0, 24576.0, 2.5), (0.0, 100.0, 1.0), (10.0, 0.0, None),
])
def test_acceptance_length_counts_the_bonus_token(accepted: float, drafts: float, expected: float | None) -> None:
    assert signals.acceptance_length(accepted, drafts) == expected


def _gpu(name: str, value: float, **labels: str) -> Sample:
    return Sample(name, {"uuid": "GPU-1", **labels}, value)


UTIL, SM = "sloguard_gpu_utilization_ratio", "sloguard_gpu_sm_active_ratio"


@pytest.mark.parametrize(("samples", "expected"), [
    ([], None),
    ([_gpu(UTIL, 0.9), Sample(UTIL, {"uuid": "GPU-2"}, 0.5)], (0.7, "utilization")),  # mean of the host's GPUs
    ([_gpu(UTIL, 1.0), _gpu(SM, 0.2)], (0.2, "sm_active")),  # SM activity wins over "a kernel ran"
    ([_gpu(UTIL, 0.1), _gpu(UTIL, 0.95, target="chat")], (0.95, "utilization")),  # the target's own GPUs
    ([_gpu(UTIL, 0.95, target="other")], None),  # another target's GPUs are not this one's
])
def test_gpu_activity(samples: list[Sample], expected: tuple[float, str] | None) -> None:
    got = signals.gpu_activity(samples, "chat")
    assert got == (pytest.approx(expected[0]), expected[1]) if expected else got is None


@pytest.mark.parametrize(("activity", "waiting", "expected"), [
    (0.95, 0, (True, False)), (0.95, 1, (False, False)), (0.05, 4, (False, True)), (0.05, 3, (False, False)),
    (0.5, 0, (False, False)), (0.1, 10, (False, True)),
])
def test_contradictions(activity: float, waiting: float, expected: tuple[bool, bool]) -> None:
    assert signals.contradictions(activity, waiting, (0.9, 0), (0.1, 4)) == expected


def test_ring_mean_and_horizon() -> None:
    ring = signals.Ring(horizon=100.0)
    for t in range(0, 200, 10):
        ring.add(float(t), float(t))
    assert ring.values(30.0, 190.0) == [170.0, 180.0, 190.0]
    assert ring.mean(30.0, 190.0) == (180.0, 3)
    assert ring.mean(30.0, 500.0) is None
    assert min(ring.values(1000.0, 190.0)) >= 90.0  # older than the horizon is gone


def _cfg(guardrails: dict[str, object] | None = None, interval: str = "15s") -> Config:
    target = {"name": "chat", "scrape_interval": interval, "guardrails": guardrails or {}}
    return Config.model_validate({"version": "sloguard/v1", "targets": [target]})


def _view(ts: float, counters: dict[str, float] | None = None, gauges: dict[str, float] | None = None,
          model: str = "m") -> ServerView:
    mv = ModelView(model, gauges=gauges or {}, counters=counters or {})
    return ServerView("chat", "vllm", ts, {model: mv})


def _feed(guard: GuardSignals, server: ServerWindows, view: ServerView) -> None:
    server.add(view)
    guard.add(view)


def _values(guard: GuardSignals, server: ServerWindows, now: float, gpu: list[Sample] | None = None
            ) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in guard.families(now, server, gpu or []) for s in fam.samples}


def _get(values: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float | None:
    return next((v for (n, lab), v in values.items() if n == name and dict(lab).items() >= labels.items()), None)


def test_vllm_counters_give_acceptance_and_length_over_the_window() -> None:
    guard, server = GuardSignals(_cfg()), ServerWindows()
    for i in range(11):  # 10 s apart: per step 300 drafts of 3 tokens, 450 accepted
        _feed(guard, server, _view(10.0 * i, {"spec_drafts": 300.0 * i, "spec_draft_tokens": 900.0 * i,
                                              "spec_accepted_tokens": 450.0 * i}))
    values = _values(guard, server, 100.0)
    assert _get(values, "sloguard_server_spec_decode_acceptance_ratio", window="1m") == pytest.approx(0.5)
    assert _get(values, "sloguard_server_spec_decode_acceptance_length", window="5m") == pytest.approx(2.5)


def test_sglang_gauges_are_averaged_and_ignored_while_speculative_decoding_is_off() -> None:
    guard, server = GuardSignals(_cfg({"spec_decode_acceptance": {}})), ServerWindows()
    for i, (rate, length) in enumerate([(0.0, 0.0), (0.3, 1.9), (0.5, 2.5), (0.4, 2.2), (0.0, 0.0)]):
        _feed(guard, server, _view(10.0 * i, gauges={"spec_acceptance_ratio": rate, "spec_acceptance_length": length}))
    values = _values(guard, server, 40.0)
    assert _get(values, "sloguard_server_spec_decode_acceptance_ratio", window="1m") == pytest.approx(0.4)
    assert _get(values, "sloguard_server_spec_decode_acceptance_length", window="1m") == pytest.approx(2.2)
    assert _get(values, "sloguard_guardrail_evidence", guardrail="spec_decode_acceptance") == 3.0
    assert _get(values, "sloguard_guardrail_value", guardrail="spec_decode_acceptance") == pytest.approx(0.4)


def test_sglang_gauges_of_a_server_without_speculative_decoding_export_nothing() -> None:
    guard, server = GuardSignals(_cfg({"spec_decode_acceptance": {}})), ServerWindows()
    for i in range(5):
        _feed(guard, server, _view(10.0 * i, gauges={"spec_acceptance_ratio": 0.0, "spec_acceptance_length": 0.0}))
    values = _values(guard, server, 40.0)
    assert _get(values, "sloguard_server_spec_decode_acceptance_ratio") is None
    assert _get(values, "sloguard_guardrail_value") is None


@pytest.mark.parametrize(("queried_per_scrape", "judged"), [(2000.0, True), (100.0, False)])
def test_prefix_cache_value_needs_its_evidence(queried_per_scrape: float, judged: bool) -> None:
    guard, server = GuardSignals(_cfg({"prefix_cache_hit_ratio": {"min_tokens": 10000}})), ServerWindows()
    for i in range(31):  # 5 min of scrapes every 10 s
        _feed(guard, server, _view(10.0 * i, {"prefix_cache_queries": queried_per_scrape * i,
                                              "prefix_cache_hits": 0.25 * queried_per_scrape * i}))
    values = _values(guard, server, 300.0)
    assert _get(values, "sloguard_guardrail_evidence", guardrail="prefix_cache_hit_ratio") == \
        pytest.approx(30 * queried_per_scrape)
    assert _get(values, "sloguard_guardrail_threshold", guardrail="prefix_cache_hit_ratio") == 0.6
    value = _get(values, "sloguard_guardrail_value", guardrail="prefix_cache_hit_ratio")
    assert (value == pytest.approx(0.25)) if judged else value is None


def test_contradiction_share_over_the_window_from_each_evaluation() -> None:
    cfg = _cfg({"idle_gpu_deep_queue": {"window": "2m", "min_readings": 4}})
    guard, server = GuardSignals(cfg), ServerWindows()
    values = {}
    for i in range(12):  # evaluations every 15 s; the queue is deep from the 4th on, the GPU idle throughout
        now = 15.0 * i
        _feed(guard, server, _view(now, gauges={"requests_waiting": 10.0 if i >= 4 else 0.0}))
        values = _values(guard, server, now, [Sample(UTIL, {"uuid": "GPU-1"}, 0.02)])
    assert _get(values, "sloguard_server_idle_gpu_deep_queue_ratio", window="2m") == pytest.approx(1.0)
    assert _get(values, "sloguard_server_busy_gpu_empty_queue_ratio", window="5m") == pytest.approx(0.0)
    assert _get(values, "sloguard_guardrail_value", guardrail="idle_gpu_deep_queue") == pytest.approx(1.0)
    assert _get(values, "sloguard_server_gpu_activity_ratio", source="utilization") == pytest.approx(0.02)


def test_no_contradiction_reading_without_a_gpu_or_with_a_stale_scrape() -> None:
    guard, server = GuardSignals(_cfg({"busy_gpu_empty_queue": {}})), ServerWindows()
    _feed(guard, server, _view(0.0, gauges={"requests_waiting": 0.0}))
    assert _get(_values(guard, server, 15.0), "sloguard_guardrail_evidence") is None  # no GPU series
    gpu = [Sample(UTIL, {"uuid": "GPU-1"}, 0.99)]
    assert _get(_values(guard, server, 300.0, gpu), "sloguard_guardrail_evidence") is None  # scrape too old
    assert _get(_values(guard, server, 20.0, gpu), "sloguard_guardrail_evidence", guardrail="busy_gpu_empty_queue") \
        == 1.0


def test_reconfigure_forgets_removed_targets() -> None:
    guard, server = GuardSignals(_cfg()), ServerWindows()
    _feed(guard, server, _view(0.0, gauges={"spec_acceptance_ratio": 0.5, "spec_acceptance_length": 2.0}))
    guard.reconfigure(Config.model_validate({"version": "sloguard/v1"}))
    assert _values(guard, server, 1.0) == {}
