"""How the model-level faults act on the running simulator (sloguard.sim.faults documents each one).

Everything goes through the engine's own model: the step multiplier (GPU clock), the KV block budget, the
background load generator's rate and prompt lengths, a GIL-holding neighbour thread, and a restart that
aborts the engine's requests, resets its counters and pauses it for a cold start. Nothing here sets an
output (a histogram, a gauge) directly.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Protocol

from sloguard.sim.cpuburn import CPUBurner
from sloguard.sim.engine import Engine
from sloguard.sim.faults import Faults
from sloguard.sim.metrics import SimMetrics
from sloguard.sim.model import LatencyProfile
from sloguard.sim.scheduler import Scheduler

# After a restart's cold start the engine warms up (graph capture and compilation on first shapes, an empty
# prefix cache): steps run WARMUP_SLOWDOWN times slower for WARMUP_FACTOR times the cold start.
WARMUP_SLOWDOWN, WARMUP_FACTOR = 4.0, 3.0


class Simulator(Protocol):
    """What the faults act on (sloguard.sim.simulator.Simulator)."""

    model: str
    profile: LatencyProfile
    faults: Faults
    metrics: SimMetrics
    engine: Engine
    scheduler: Scheduler
    burner: CPUBurner
    warm_until: float
    restarts: int

    def enable_spec_decode(self, k: int) -> None:
        """Export the speculative-decoding counters for a draft of `k` tokens per step."""
        ...


def step_multiplier(sim: Simulator) -> float:
    """Return the engine's step multiplier now: latency fault ÷ GPU clock ratio × warm-up after a restart."""
    f = sim.faults
    warming = WARMUP_SLOWDOWN if _now() < sim.warm_until else 1.0
    return f.latency_multiplier / f.gpu_clock_ratio * warming


def _now() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return 0.0


def apply(sim: Simulator, faults: Faults, keys: set[str]) -> None:
    """Apply `faults` to the simulator; `keys` are those the request named (actions run only when named)."""
    sim.faults = faults
    hits = sim.profile.prefix_hit_ratio if faults.prefix_hit_ratio is None else faults.prefix_hit_ratio
    sim.engine.profile = dataclasses.replace(sim.engine.profile, kv_blocks=faults.kv_blocks or sim.profile.kv_blocks,
                                             prefix_hit_ratio=hits)
    sim.scheduler.rate_multiplier = faults.load_multiplier
    sim.scheduler.prompt_scale = faults.prompt_scale
    sim.burner.set(faults.cpu_burn)
    if "engine_restart_s" in keys and faults.engine_restart_s > 0:
        restart(sim, faults.engine_restart_s)
    sim.engine.multiplier = step_multiplier(sim)


def restart(sim: Simulator, cold_s: float) -> None:
    """Restart the engine: abort its requests, reset its counters, pause `cold_s`, then warm up (module constants)."""
    now = _now()
    sim.engine.abort_all("abort")  # the batch dies with the process, not at the end of the step in flight
    spec = sim.metrics.spec
    metrics = SimMetrics(sim.model, sim.profile.max_batched_tokens, sim.profile.block_size, sim.profile.kv_blocks)
    sim.metrics = metrics
    sim.engine.recorder = metrics
    if spec is not None:  # the restarted engine exports its speculative-decoding counters again, from 0
        sim.enable_spec_decode(spec.k)
    sim.scheduler.paused_until = now + cold_s
    sim.warm_until = now + cold_s * (1.0 + WARMUP_FACTOR)
    sim.restarts += 1
