"""Continuous-batching engine on a fake clock: step durations, admission limits, preemption, cancel."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sim_fakes import PROFILE, make_engine, request, run_step

from sloguard.sim.model import LatencyProfile


@pytest.mark.parametrize(("prompt", "cached", "ttft"), [(100, 0, 0.110), (1, 0, 0.011), (100, 40, 0.070)])
def test_lone_request_ttft_is_prefill_of_uncached_tokens(prompt: int, cached: int, ttft: float) -> None:
    engine, _, clock = make_engine()
    req = request("a", clock, prompt=prompt, cached=cached)
    engine.submit(req)
    run_step(engine, clock)
    assert req.first_token is not None
    assert req.first_token - req.arrival == pytest.approx(ttft)


def test_decode_steps_cost_base_plus_batch_and_finish_at_target() -> None:
    engine, rec, clock = make_engine()
    reqs = [request(r, clock, prompt=10, tokens=3) for r in "ab"]
    for r in reqs:
        engine.submit(r)
    durations = [run_step(engine, clock)[0] for _ in range(3)]
    assert durations == pytest.approx([0.010 + 0.001 * 20, 0.005 + 0.001 * 2, 0.005 + 0.001 * 2])
    assert [d for d in rec.done] == [("a", "length"), ("b", "length")]
    assert [g for _, g in rec.tokens] == pytest.approx([None, None, 0.007, 0.007, 0.007, 0.007])
    assert run_step(engine, clock) == (None, [])


@pytest.mark.parametrize(("field_", "value", "admitted"), [
    ("max_batch", 2, 2), ("max_batched_tokens", 250, 2), ("kv_blocks", 14, 2), ("max_batch", 4, 3),
])
def test_admission_limits(field_: str, value: int, admitted: int) -> None:
    engine, rec, clock = make_engine(replace(PROFILE, **{field_: value}))
    for r in "abc":
        engine.submit(request(r, clock, prompt=100))
    engine.plan()
    assert (len(engine.running), len(engine.waiting)) == (admitted, 3 - admitted)
    assert rec.steps[0][:2] == (admitted, 3 - admitted)


def test_queue_time_is_wait_for_a_free_slot() -> None:
    engine, _, clock = make_engine(replace(PROFILE, max_batch=1))
    first, second = request("a", clock, prompt=10, tokens=1), request("b", clock, prompt=10, tokens=1)
    engine.submit(first)
    engine.submit(second)
    run_step(engine, clock)
    run_step(engine, clock)
    assert second.scheduled is not None and second.queued is not None
    assert second.scheduled - second.queued == pytest.approx(0.020)


def test_oversize_prompt_is_admitted_alone() -> None:
    engine, _, clock = make_engine(replace(PROFILE, max_batched_tokens=50))
    engine.submit(request("big", clock, prompt=500))
    assert engine.plan() == pytest.approx(0.510)


def test_kv_overflow_preempts_newest_and_recomputes() -> None:
    # 4 blocks of 16: two 16-token prompts fit until each needs a third block (generated = 16).
    engine, rec, clock = make_engine(replace(PROFILE, kv_blocks=4, block_size=16))
    a, b = request("a", clock, prompt=16, tokens=20), request("b", clock, prompt=16, tokens=20)
    engine.submit(a)
    engine.submit(b)
    for _ in range(16):
        run_step(engine, clock)
    assert rec.preemptions == 0
    run_step(engine, clock)
    assert rec.preemptions == 1 and b.preemptions == 1 and list(engine.waiting) == [b]
    for _ in range(3):
        run_step(engine, clock)
    assert a.finished == "length" and b.generated == 16
    assert engine.plan() == pytest.approx(0.010 + 0.001 * 32)  # recompute prompt + generated


def test_multiplier_scales_step() -> None:
    engine, _, clock = make_engine()
    engine.multiplier = 3.0
    engine.submit(request("a", clock, prompt=100))
    assert engine.plan() == pytest.approx(0.330)


def test_cancel_of_a_waiting_request_finishes_it_as_abort_at_once() -> None:
    engine, rec, clock = make_engine()
    req = request("a", clock)
    engine.submit(req)
    engine.cancel(req)
    engine.cancel(req, "error")
    assert rec.done == [("a", "abort")] and engine.idle()


def test_cancel_of_a_running_request_frees_its_slot_when_the_step_in_flight_ends() -> None:
    engine, rec, clock = make_engine()
    told: list[tuple[int, str | None]] = []
    req, other = request("a", clock, tokens=10), request("b", clock, tokens=10)
    req.sink = lambda n, fin: told.append((n, fin))
    for r in (req, other):
        engine.submit(r)
    run_step(engine, clock)  # prefill: both emit their first token
    engine.plan()  # the next step is in flight
    engine.cancel(req)
    engine.cancel(req, "error")  # once only
    assert told[-1] == (0, "abort") and rec.done == [] and req in engine.running  # the client knows at once
    clock.advance(0.007)
    engine.complete()
    assert rec.done == [("a", "abort")] and engine.running == [other] and req.generated == 1
    assert rec.steps[-1][0] == 1  # the running gauge drops at that step's end


def test_same_seed_same_jitter() -> None:
    profile = LatencyProfile(jitter_sigma=0.1)

    def durations(seed: int) -> list[float | None]:
        engine, _, clock = make_engine(profile, seed)
        engine.submit(request("a", clock, tokens=5))
        return [run_step(engine, clock)[0] for _ in range(5)]

    assert durations(1) == durations(1) != durations(2)
