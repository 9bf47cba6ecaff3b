"""Model-level simulator faults act through the engine model (sim.effects), never by setting an output."""

from __future__ import annotations

import asyncio
import random

import pytest

from sloguard.sim import effects
from sloguard.sim.engine import Engine, SimRequest
from sloguard.sim.faults import Faults, merge
from sloguard.sim.metrics import SimMetrics
from sloguard.sim.model import LatencyProfile
from sloguard.sim.simulator import Simulator


def test_faults_validate() -> None:
    f = merge(Faults(), {"load_multiplier": 4, "kv_blocks": 320, "prompt_scale": 3, "gpu_clock_ratio": 0.4,
                         "cpu_burn": 0.0, "engine_restart_s": 2})
    assert (f.load_multiplier, f.kv_blocks, f.prompt_scale, f.gpu_clock_ratio) == (4.0, 320, 3.0, 0.4)
    for bad in ({"gpu_clock_ratio": 0}, {"cpu_burn": 2}, {"kv_blocks": -1}, {"engine_restart_s": "x"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            merge(Faults(), bad)


def test_faults_set_the_model_and_clear_restores_it() -> None:
    sim = Simulator(seed=1)
    sim.set_faults({"kv_blocks": 320, "load_multiplier": 4, "prompt_scale": 3, "gpu_clock_ratio": 0.5,
                    "latency_multiplier": 2})
    assert sim.engine.profile.kv_blocks == 320 and sim.profile.kv_blocks == LatencyProfile().kv_blocks
    assert (sim.scheduler.rate_multiplier, sim.scheduler.prompt_scale) == (4.0, 3.0)
    assert effects.step_multiplier(sim) == pytest.approx(4.0) and sim.engine.multiplier == pytest.approx(4.0)
    sim.clear_faults()
    assert sim.engine.profile.kv_blocks == LatencyProfile().kv_blocks and sim.engine.multiplier == 1.0
    assert (sim.scheduler.rate_multiplier, sim.scheduler.prompt_scale) == (1.0, 1.0)


def test_restart_resets_counters_aborts_and_pauses() -> None:
    async def scenario() -> None:
        sim = Simulator(seed=1)
        req = SimRequest("r1", 64, 8, 8, "length", 0.0, sink=lambda n, fin: None)
        sim.engine.submit(req)
        sim.metrics.preempted()
        old, now = sim.metrics, asyncio.get_running_loop().time()
        sim.set_faults({"engine_restart_s": 3.0})
        assert req.finished == "abort" and not sim.engine.waiting
        assert sim.metrics is not old and sim.engine.recorder is sim.metrics
        assert b'vllm:num_preemptions_total{engine="0",model_name="sim-llama-3-8b"} 0.0' in sim.metrics.render()
        assert sim.scheduler.paused_until - now == pytest.approx(3.0, abs=0.5)
        assert sim.warm_until - now == pytest.approx(12.0, abs=0.5) and sim.restarts == 1
        assert effects.step_multiplier(sim) == effects.WARMUP_SLOWDOWN  # warming up: slower steps
        sim.set_faults({"load_multiplier": 2.0})  # merging other faults later does not restart again
        assert sim.restarts == 1
    asyncio.run(scenario())


def test_kv_shrink_preempts_through_the_engine() -> None:
    """Fewer KV blocks: the engine's own admission and overflow rules preempt; nothing sets the counter."""
    now = [0.0]
    metrics = SimMetrics("m", 8192, 16, 64)
    profile = LatencyProfile(kv_blocks=64, jitter_sigma=0.0)
    engine = Engine(profile, random.Random(0), metrics, lambda: now[0])
    for i in range(3):
        engine.submit(SimRequest(f"r{i}", 300, 200, 200, "length", 0.0))
    for _ in range(200):
        if engine.plan() is None:
            break
        now[0] += 0.01
        engine.complete()
    text = metrics.render().decode()
    preempted = float(next(line.split()[-1] for line in text.splitlines()
                           if line.startswith("vllm:num_preemptions_total{")))
    assert preempted > 0


def test_restart_ends_running_requests_at_once_and_keeps_the_spec_counters() -> None:
    """A client cancel waits for the step in flight; a restart does not: the batch dies with the process."""
    async def scenario() -> None:
        sim = Simulator(seed=1)
        sim.enable_spec_decode(3)
        told: list[str | None] = []
        req = SimRequest("r1", 64, 8, 8, "length", 0.0, sink=lambda n, fin: told.append(fin))
        sim.engine.submit(req)
        assert sim.engine.plan() is not None and sim.engine.running == [req]
        sim.set_faults({"engine_restart_s": 1.0})
        assert req.finished == "abort" and told == ["abort"] and not sim.engine.running
        assert sim.metrics.spec is not None and sim.metrics.spec.k == 3  # the restarted engine exports them again
        assert b"vllm:spec_decode_num_drafts_total" in sim.metrics.render()
    asyncio.run(scenario())


def test_prefix_hits_and_kv_shrink_apply_together() -> None:
    sim = Simulator(seed=1)
    sim.set_faults({"prefix_hit_ratio": 0.9})
    sim.set_faults({"kv_blocks": 320})
    assert (sim.engine.profile.prefix_hit_ratio, sim.engine.profile.kv_blocks) == (0.9, 320)
    sim.set_faults({"prefix_hit_ratio": None})
    profile = sim.engine.profile
    assert (profile.prefix_hit_ratio, profile.kv_blocks) == (LatencyProfile().prefix_hit_ratio, 320)


@pytest.mark.parametrize(("scale", "slice_s"), [(1.0, 0.1), (2.0, 0.2), (0.5, 0.05)])
def test_the_cpu_burn_slice_is_a_model_time(scale: float, slice_s: float) -> None:
    """--time-scale stretches the burn's GIL-holding slice like the engine's steps (its relative effect stays)."""
    from sloguard.sim.server import make_simulator

    sim = make_simulator(seed=1, time_scale=scale)
    assert sim.burner.slice_s == pytest.approx(slice_s)
    assert sim.profile.decode_base_s == pytest.approx(LatencyProfile().decode_base_s * scale)
