"""The simulator's engine in virtual time follows the latency model; time_scale is an exact true regression."""

from __future__ import annotations

import random
from collections import Counter

import jsonschema
import pytest

from sloguard.bench.schema import schema
from sloguard.sim.benchfile import closed_run, spaced_run
from sloguard.sim.model import LatencyProfile
from sloguard.sim.scheduler import BACKGROUND_MIX
from sloguard.sim.virtual import VirtualServer, spaced


def test_an_idle_server_gives_the_models_ttft_and_tpot() -> None:
    p = LatencyProfile()
    server = VirtualServer(1, p, background_rps=0.0)
    done = spaced(server, 50, 5.0, [(256, 1.0)], 16, random.Random(1), ignore_eos=True)
    ttft = p.prefill_base_s + p.prefill_per_token_s * 256
    tpot = p.decode_base_s + p.decode_per_seq_s
    bound = 1.15  # exp(±4.5 σ) of the per-step jitter with σ = 0.03
    for d in done:
        assert d.output_tokens == 16 and d.queue_s == 0.0
        assert ttft / bound < d.ttft_s < ttft * bound
        assert d.tpot_s is not None and tpot / bound < d.tpot_s < tpot * bound


def test_background_load_makes_a_tail() -> None:
    idle = spaced(VirtualServer(2, background_rps=0.0), 300, 1.0, [(64, 1.0)], 16, random.Random(2))
    busy = spaced(VirtualServer(2), 300, 1.0, [(64, 1.0)], 16, random.Random(2))
    assert max(d.ttft_s for d in busy) > 2 * max(d.ttft_s for d in idle)


@pytest.mark.parametrize("make", [lambda s: spaced_run(3, 200, time_scale=s),
                                  lambda s: closed_run(3, [4], 200, time_scale=s)])
def test_time_scale_scales_every_latency_exactly(make: object) -> None:
    base = [r for r in make(1.0) if r["type"] == "request"]  # type: ignore[operator]
    slow = [r for r in make(1.1) if r["type"] == "request"]  # type: ignore[operator]
    assert len(base) == len(slow) == 200
    for a, b in zip(base, slow, strict=True):
        for key in ("ttft_s", "e2e_s", "queue_s"):
            assert b[key] == pytest.approx(1.1 * a[key], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("records", [spaced_run(4, 30), closed_run(4, [1, 4], 30)])
def test_virtual_runs_are_the_bench_schema(records: list[dict[str, object]]) -> None:
    """Written through the bench's own row writers, so they validate against its published schema."""
    validator = jsonschema.Draft202012Validator(schema())
    for row in records:
        validator.validate(row)


def _faulted(seed: int, rps: float, at: float, fault: str, value: float) -> tuple[list[tuple[float, int]],
                                                                                   list[tuple[float, int]]]:
    """Run `at` virtual seconds healthy, set the fault, run as long again; return the prefills and finishes."""
    server = VirtualServer(seed, background_rps=rps)
    prefills, finishes = server.record_requests()
    server.run_until(at)
    setattr(server, fault, value)
    server.run_until(2 * at)
    return prefills, finishes


def test_prompt_scale_lengthens_the_background_prompts_prefilled_from_then_on() -> None:
    """Every prefill is kept (first token's time, prompt tokens), in time order; the fault applies to new arrivals."""
    prefills, finishes = _faulted(4, 2.0, 300.0, "prompt_scale", 4.0)
    times = [t for t, _ in prefills]
    assert times == sorted(times) and times[-1] <= 600.0 and 1000 < len(prefills) < 1400  # ~2/s
    mix = {p for p, *_ in BACKGROUND_MIX}
    before = [p for t, p in prefills if t < 300.0]
    after = [p for t, p in prefills if t > 330.0]  # arrivals queued at the switch are prefilled at their own length
    assert set(before) <= mix and all(p % 4 == 0 and p // 4 in mix for p in after)
    assert sum(after) / len(after) == pytest.approx(4 * sum(before) / len(before), rel=0.25)
    ends = [t for t, _ in finishes]
    assert ends == sorted(ends) and len(prefills) - 20 < len(finishes) <= len(prefills)
    assert not Counter(p for _, p in finishes) - Counter(p for _, p in prefills)  # each finished after its prefill


def test_load_multiplier_scales_the_background_arrivals_from_then_on() -> None:
    prefills, _ = _faulted(5, 1.0, 400.0, "load_multiplier", 3.0)
    before = sum(1 for t, _ in prefills if t < 400.0)
    after = sum(1 for t, _ in prefills if t >= 400.0)
    assert 340 < before < 460 and 1080 < after < 1320  # Poisson 400 ± 20 and 1200 ± 35, within 3 sd


def test_shrink_kv_holds_requests_back_and_preempts_from_then_on() -> None:
    """The served simulator's `kv_blocks` fault in virtual time: none preempted before, admission waits after."""
    server = VirtualServer(6, background_rps=2.0)
    waiting_before = waiting_after = 0
    t = 0.0
    while t < 1200.0:
        t += 1.0
        if t == 600.0:
            assert server.preemptions == 0  # 4,096 blocks hold the mix's requests with room to spare
            server.shrink_kv(160)
        server.run_until(t)
        queued = len(server.engine.waiting) > 0
        waiting_before, waiting_after = waiting_before + (queued and t < 600.0), waiting_after + (queued and t > 600.0)
    assert server.engine.profile.kv_blocks == 160 and server.preemptions > 0
    assert waiting_after > 5 * max(waiting_before, 1)


def test_queue_times_are_kept_per_finish_and_grow_when_the_kv_cache_shrinks() -> None:
    """As vLLM's queue-time histogram: one (finish time, seconds queued) per finished request, in time order."""
    server = VirtualServer(7, background_rps=2.0)
    _, finishes = server.record_requests()
    queues = server.record_queue_times()
    server.run_until(300.0)
    healthy = len(queues)
    server.shrink_kv(160)
    server.run_until(600.0)
    assert [t for t, _ in queues] == [t for t, _ in finishes] and all(q >= 0.0 for _, q in queues)
    before, after = [q for _, q in queues[:healthy]], [q for _, q in queues[healthy:]]
    # healthy: a request waits at most for the step in flight; a cache of 160 blocks holds requests back for blocks
    assert sum(before) / len(before) < 0.05 and sum(after) / len(after) > 0.5  # measured: 0.018 s, 0.88 s
