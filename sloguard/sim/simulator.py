"""The simulator's state: profile, engine, scheduler, metrics, faults and a log of recent requests."""

from __future__ import annotations

import asyncio
import random
import time
from collections import OrderedDict
from typing import Any

from sloguard import __version__
from sloguard.sim import effects
from sloguard.sim import faults as faults_mod
from sloguard.sim.cpuburn import CPUBurner
from sloguard.sim.dcgm import GPUState
from sloguard.sim.engine import Engine, SimRequest, TokenSink
from sloguard.sim.faults import Faults
from sloguard.sim.metrics import SimMetrics
from sloguard.sim.model import LatencyProfile, output_length
from sloguard.sim.scheduler import BACKGROUND_MIX, Scheduler
from sloguard.sim.wire import MAX_MODEL_LEN, GenParams

DEFAULT_MODEL = "sim-llama-3-8b"
REQUEST_LOG_SIZE = 10_000
DEFAULT_BACKGROUND_RPS = 2.0
DEFAULT_ENGINE_VERSION = f"sloguard-sim-{__version__}"  # what GET /version answers unless told


class Simulator:
    """One simulated vLLM server; `start()` must run inside the event loop that serves it."""

    def __init__(self, seed: int = 0, model: str = DEFAULT_MODEL, profile: LatencyProfile | None = None,
                 background_rps: float = DEFAULT_BACKGROUND_RPS) -> None:
        self.seed = seed
        self.model = model
        self.profile = profile or LatencyProfile()
        self.background_rps = background_rps
        self.faults = Faults()
        self.metrics = SimMetrics(model, self.profile.max_batched_tokens, self.profile.block_size,
                                  self.profile.kv_blocks)
        # Separate streams so client traffic does not shift the background's or the faults' draws.
        self._rng_engine = random.Random(f"{seed}/engine")
        self._rng_requests = random.Random(f"{seed}/requests")
        self.rng_faults = random.Random(f"{seed}/faults")
        self._rng_background = random.Random(f"{seed}/background")
        self.engine = Engine(self.profile, self._rng_engine, self.metrics, self._now)
        self.scheduler = Scheduler(self.engine, lambda: self.faults.stall_first_token_s)
        self.created = int(time.time())
        self._seq = 0
        self._log: OrderedDict[str, SimRequest] = OrderedDict()
        self.tracer: Any = None  # sim.tracing.SimTracer when spans are exported (`--otlp-traces-endpoint`)
        self.engine_profile = "vllm"  # sloguard.sim.profiles: whose metrics, head timing and stream shape
        self.per_request_metrics = False  # vLLM's --enable-per-request-metrics: `metrics` in the usage chunk
        self.max_model_len = MAX_MODEL_LEN  # vLLM's --max-model-len: longer requests get a 400 (or a fault)
        self.engine_version = DEFAULT_ENGINE_VERSION  # what GET /version answers
        self.burner = CPUBurner()  # the cpu_burn fault's GIL-holding neighbour thread
        self.warm_until = 0.0  # after an engine restart: steps run slower until then (sim.effects)
        self.restarts = 0
        self.gpu = GPUState()  # the simulated GPU's dcgm-exporter page (sim.dcgm)
        self.scheduler.multiplier_fn = lambda: effects.step_multiplier(self)

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    def start(self) -> None:
        """Start the step loop and the background load on the running loop."""
        self.scheduler.start(self.background_rps, self._rng_background)

    async def stop(self) -> None:
        """Stop every task (and the cpu_burn thread) the simulator started."""
        self.burner.stop()
        await self.scheduler.stop()

    def set_faults(self, payload: object) -> Faults:
        """Merge `payload` into the faults (ValueError when invalid) and apply the multiplier."""
        merged = faults_mod.merge(self.faults, payload)
        effects.apply(self, merged, set(payload) if isinstance(payload, dict) else set())
        return self.faults

    def enable_spec_decode(self, k: int) -> None:
        """Export vLLM's speculative-decoding counters for a draft of `k` tokens per step (sim.spec)."""
        from sloguard.sim.spec import SpecDecode

        self.metrics.spec = SpecDecode(k, random.Random(f"{self.seed}/spec"), lambda: self.faults.spec_acceptance,
                                       self.metrics.registry, ("engine", "model_name"), ("0", self.model))

    def clear_faults(self) -> Faults:
        """Remove every fault."""
        effects.apply(self, Faults(), set())
        return self.faults

    def new_request(self, p: GenParams, arrival: float, sink: TokenSink) -> SimRequest:
        """Create and log a client request (not yet submitted); id like vLLM's `chatcmpl-…`/`cmpl-…`."""
        self._seq += 1
        prefix = "chatcmpl" if p.api == "chat" else "cmpl"
        rid = f"{prefix}-sim{self.seed}-{self._seq:08d}"
        target, reason = output_length(p.max_tokens, p.ignore_eos, self._rng_requests)
        req = SimRequest(rid=rid, prompt_tokens=p.prompt_tokens, max_tokens=p.max_tokens,
                         target_tokens=target, finish_reason=reason, arrival=arrival, sink=sink)
        self._log[rid] = req
        while len(self._log) > REQUEST_LOG_SIZE:
            self._log.popitem(last=False)
        return req

    def profile_json(self) -> dict[str, Any]:
        """Return the latency profile, model, seed, background rate and current faults."""
        mix = [{"prompt_tokens": p, "max_tokens": m, "weight": w} for p, m, w in BACKGROUND_MIX]
        return {"model": self.model, "seed": self.seed, "background_rps": self.background_rps,
                "background_mix": mix, "profile": self.profile.as_json(), "faults": self.faults.as_json()}

    def arrivals_json(self) -> dict[str, Any]:
        """Return the wall times of the background users' last 4,096 arrivals, oldest first."""
        return {"background": list(self.scheduler.arrivals)}

    def request_json(self, rid: str) -> dict[str, Any] | None:
        """Return one logged request's server-side timeline in seconds from receipt, or None.

        `rid` is the response's id, or the W3C trace id of the client's `traceparent` (newest match).
        """
        req = self._log.get(rid) or next((r for r in reversed(self._log.values()) if r.trace_id == rid), None)
        if req is None:
            return None
        return timeline(req)


def _since(t: float | None, origin: float | None) -> float | None:
    return None if t is None or origin is None else t - origin


def _span(pair: tuple[float, float] | None, origin: float) -> list[float] | None:
    return None if pair is None else [pair[0] - origin, pair[1] - origin]


def timeline(req: SimRequest) -> dict[str, Any]:
    """Return a request's timeline: offsets from arrival plus vLLM's phase durations.

    Outside the engine's TTFT: `front_s` (the kernel's receipt → the handler: a busy host's late loop; None
    where unknown), `network_delay_s` (the fault, as waited), `queued_s`, and `head_sent_s` / `chunks_sent_s`:
    [before, after] the write of the response head / of each of the first 8 token chunks (streams only).
    """
    return {
        "id": req.rid, "prompt_tokens": req.prompt_tokens, "cached_tokens": req.cached_tokens,
        "max_tokens": req.max_tokens, "output_tokens": req.generated, "finish_reason": req.finished,
        "stall_s": req.stall_s, "preemptions": req.preemptions,
        "queued_s": _since(req.queued, req.arrival), "scheduled_s": _since(req.scheduled, req.arrival),
        "first_token_s": _since(req.first_token, req.arrival), "last_token_s": _since(req.last_token, req.arrival),
        "queue_s": _since(req.scheduled, req.queued), "prefill_s": _since(req.first_token, req.scheduled),
        "decode_s": _since(req.last_token, req.first_token),
        "prefill_step_s": req.prefill_step_s, "network_delay_s": req.network_delay_s, "trace_id": req.trace_id,
        "front_s": req.front_s, "head_sent_s": _span(req.head_sent, req.arrival),
        "chunks_sent_s": [_span(c, req.arrival) for c in req.chunks_sent],
    }
