"""The daemon's guardrail signals: fed every scrape and each evaluation's samples, exported as families.

Derived series, for every target with the inputs (thresholds from its `guardrails`, else the defaults):
`sloguard_server_spec_decode_acceptance_ratio` and `_acceptance_length` (counters over the window where the
engine has them, else the mean of its gauges' scrapes), `sloguard_server_gpu_activity_ratio`, and the share
of evaluations in the window with a busy GPU and an empty queue / an idle GPU and a deep queue. For each
enabled guardrail, `sloguard_guardrail_value` holds the value its alert compares, only while the window holds
the evidence it needs (`sloguard_guardrail_evidence` says how much it holds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.metrics_core import Metric

from sloguard.config.guard import (
    BusyGpuEmptyQueueGuard,
    GuardBase,
    GuardrailsSpec,
    IdleGpuDeepQueueGuard,
    PrefixCacheGuard,
    SpecDecodeGuard,
)
from sloguard.config.spec import Config
from sloguard.config.units import format_duration
from sloguard.families import declare
from sloguard.guardrails import signals
from sloguard.model import Sample, ServerView

WINDOWS = (60.0, 300.0)  # as the other sloguard_server_* rates
HORIZON = 900.0  # the longest guardrail window
MIN_GAUGE_READINGS = 3  # scrapes of an engine's spec-decode gauges before their mean counts as evidence
_FROM = "computed over the window from the engine's /metrics scrapes in it"
_TMW = ("target", "model", "window")
SPEC_RATIO = declare("sloguard_server_spec_decode_acceptance_ratio", "gauge",
                     f"Speculative decoding: accepted / draft tokens, {_FROM}.", _TMW)
SPEC_LENGTH = declare("sloguard_server_spec_decode_acceptance_length", "gauge", "Speculative decoding: mean tokens "
                      f"emitted per draft-and-verify step (accepted + the bonus token), {_FROM}.", _TMW)
ACTIVITY = declare("sloguard_server_gpu_activity_ratio", "gauge", "GPU activity the contradiction guardrails read for "
                   "a target: mean over its GPUs of SM activity (GPM or DCGM), else NVML utilisation; latest "
                   "evaluation.", ("target", "source"))
CONTRADICTIONS = {name: declare(f"sloguard_server_{name}_ratio", "gauge", f"Share of the window's evaluations with "
                                f"{text} (thresholds from the target's guardrails, else the defaults).",
                                ("target", "window"))
                  for name, text in (("busy_gpu_empty_queue", "a busy GPU while no request waits"),
                                     ("idle_gpu_deep_queue", "an idle GPU while requests wait"))}
GUARD_VALUE = declare("sloguard_guardrail_value", "gauge", "The value an enabled guardrail's alert compares, present "
                      "only while its window holds the evidence it needs.", ("target", "model", "guardrail"))
GUARD_EVIDENCE = declare("sloguard_guardrail_evidence", "gauge", "What the guardrail's window holds: prompt tokens "
                         "(prefix cache), draft tokens or gauge scrapes (speculative decoding), evaluations with a GPU "
                         "and a queue reading (contradictions).", ("target", "model", "guardrail"))
GUARD_THRESHOLD = declare("sloguard_guardrail_threshold", "gauge", "The threshold of an enabled guardrail.",
                          ("target", "guardrail"))


class ServerWindowsLike(Protocol):
    def model_increase(self, target: str, name: str, window: float, now: float) -> dict[str, tuple[float, float]]:
        """Return model -> (counter increase, seconds spanned) over the window."""
        ...


@dataclass(frozen=True, slots=True)
class Reading:
    """One guardrail value of one model (model "" for target-level ones) and the evidence behind it."""

    value: float | None
    evidence: float
    unit: str = "tokens"  # what `evidence` counts: tokens, scrapes (gauge means) or readings (contradictions)


class GuardSignals:
    """Gauge rings and contradiction readings per target; not thread-safe (the daemon's loop only)."""

    def __init__(self, cfg: Config) -> None:
        self._gauges: dict[tuple[str, str, str], signals.Ring] = {}
        self._flags: dict[tuple[str, str], signals.Ring] = {}
        self._latest: dict[str, ServerView] = {}
        self._activity: dict[str, tuple[float, str]] = {}
        self.reconfigure(cfg)

    def reconfigure(self, cfg: Config) -> None:
        """Adopt a config; forget the state of targets that are gone."""
        self._guards: dict[str, GuardrailsSpec] = {t.name: t.guardrails for t in cfg.targets}
        self._fresh = {t.name: max(2 * t.scrape_interval, 30.0) for t in cfg.targets}
        self._gauges = {k: v for k, v in self._gauges.items() if k[0] in self._guards}
        self._flags = {k: v for k, v in self._flags.items() if k[0] in self._guards}
        for target in [t for t in self._latest if t not in self._guards]:
            del self._latest[target]

    def add(self, view: ServerView) -> None:
        """Record one scrape: its spec-decode gauges while speculative decoding is on, and its queue."""
        self._latest[view.target] = view
        for model, mv in view.models.items():
            length = mv.gauges.get("spec_acceptance_length")
            if length is not None and length <= 0:
                continue  # SGLang reports 0 for both while speculative decoding is off
            for sig in ("spec_acceptance_ratio", "spec_acceptance_length"):
                if sig in mv.gauges:
                    key = (view.target, model, sig)
                    self._gauges.setdefault(key, signals.Ring(HORIZON)).add(view.ts, mv.gauges[sig])

    def families(self, now: float, server: ServerWindowsLike, samples: Sequence[Sample]) -> list[Metric]:
        """Take this evaluation's contradiction readings and return every guardrail family at `now`."""
        gpu = [s for s in samples if s.name.startswith("sloguard_gpu_")]
        for target in self._guards:
            self._read_contradictions(target, gpu, now)
        out = [*self._spec_families(now, server), *self._contradiction_families(now)]
        out.extend(self._guardrail_families(now, server))
        return [f for f in out if f.samples]

    def _read_contradictions(self, target: str, gpu: Iterable[Sample], now: float) -> None:
        activity = signals.gpu_activity(gpu, target)
        view = self._latest.get(target)
        if activity is None:
            self._activity.pop(target, None)
            return
        self._activity[target] = activity
        if view is None or now - view.ts > self._fresh.get(target, 30.0):
            return
        waiting = signals.summed({m: mv.gauges for m, mv in view.models.items()}, "requests_waiting")
        if waiting is None:
            return
        busy, idle = self._contradiction_guards(target)
        flags = signals.contradictions(activity[0], waiting, (busy.gpu_at_least, busy.waiting_at_most),
                                       (idle.gpu_at_most, idle.waiting_at_least))
        for name, flag in zip(("busy_gpu_empty_queue", "idle_gpu_deep_queue"), flags, strict=True):
            self._flags.setdefault((target, name), signals.Ring(HORIZON)).add(now, float(flag))

    def _contradiction_guards(self, target: str) -> tuple[BusyGpuEmptyQueueGuard, IdleGpuDeepQueueGuard]:
        g = self._guards.get(target, GuardrailsSpec())
        return g.busy_gpu_empty_queue or BusyGpuEmptyQueueGuard(), g.idle_gpu_deep_queue or IdleGpuDeepQueueGuard()

    def spec_acceptance(self, server: ServerWindowsLike, target: str, window: float,
                        now: float) -> dict[str, Reading]:
        """Return model -> accepted / draft tokens (evidence: draft tokens), else the gauge mean (scrapes)."""
        return self._spec(server, target, ("spec_draft_tokens", "spec_acceptance_ratio"), signals.ratio, window, now)

    def spec_length(self, server: ServerWindowsLike, target: str, window: float, now: float) -> dict[str, Reading]:
        """Return model -> mean tokens per draft step: 1 + accepted / drafts, else the engine's gauge mean."""
        return self._spec(server, target, ("spec_drafts", "spec_acceptance_length"), signals.acceptance_length,
                          window, now)

    def _spec(self, server: ServerWindowsLike, target: str, names: tuple[str, str],
              combine: Callable[[float | None, float | None], float | None], window: float,
              now: float) -> dict[str, Reading]:
        """Return combine(accepted tokens, counter `names[0]`) per model, else the mean of gauge `names[1]`."""
        per = server.model_increase(target, names[0], window, now)
        accepted = server.model_increase(target, "spec_accepted_tokens", window, now)
        out = {m: Reading(combine(accepted[m][0], d), d) for m, (d, _) in per.items() if m in accepted and d > 0}
        out.update({m: r for m, r in self._gauge_readings(target, names[1], window, now).items() if m not in out})
        return out

    def _gauge_readings(self, target: str, sig: str, window: float, now: float) -> dict[str, Reading]:
        out = {}
        for (t, model, s), ring in self._gauges.items():
            got = ring.mean(window, now) if t == target and s == sig else None
            if got is not None:
                out[model] = Reading(got[0], float(got[1]), "scrapes")
        return out

    def prefix_hits(self, server: ServerWindowsLike, target: str, window: float, now: float) -> dict[str, Reading]:
        """Return model -> prefix-cache hits / queried tokens over the window (evidence: queried tokens)."""
        queries = server.model_increase(target, "prefix_cache_queries", window, now)
        hits = server.model_increase(target, "prefix_cache_hits", window, now)
        return {m: Reading(signals.ratio(hits[m][0], q), q) for m, (q, _) in queries.items() if m in hits}

    def contradiction(self, target: str, name: str, window: float, now: float) -> Reading | None:
        """Return the share of the window's readings in which the named contradiction held."""
        ring = self._flags.get((target, name))
        flags = ring.values(window, now) if ring is not None else []
        return Reading(signals.share(flags), float(len(flags)), "readings") if flags else None

    def _spec_families(self, now: float, server: ServerWindowsLike) -> list[Metric]:
        ratio_fam, length_fam = SPEC_RATIO.gauge(), SPEC_LENGTH.gauge()
        for target in sorted(self._guards):
            for w in WINDOWS:
                label = format_duration(w)
                for fam, got in ((ratio_fam, self.spec_acceptance(server, target, w, now)),
                                 (length_fam, self.spec_length(server, target, w, now))):
                    for model, r in sorted(got.items()):
                        if r.value is not None:
                            fam.add_metric([target, model, label], r.value)
        return [ratio_fam, length_fam]

    def _contradiction_families(self, now: float) -> list[Metric]:
        activity = ACTIVITY.gauge()
        for target, (value, source) in sorted(self._activity.items()):
            activity.add_metric([target, source], value)
        out: list[Metric] = [activity]
        for name, fd in CONTRADICTIONS.items():
            fam = fd.gauge()
            for target in sorted(self._guards):
                window = dict(zip(("busy_gpu_empty_queue", "idle_gpu_deep_queue"),
                                  self._contradiction_guards(target), strict=True))[name].window
                r = self.contradiction(target, name, window, now)
                if r is not None and r.value is not None:
                    fam.add_metric([target, format_duration(window)], r.value)
            out.append(fam)
        return out

    def readings(self, target: str, name: str, guard: GuardBase, server: ServerWindowsLike,
                 now: float) -> Mapping[str, Reading]:
        """Return model -> the reading an enabled guardrail judges (model "" for target-level ones)."""
        if isinstance(guard, PrefixCacheGuard):
            return self.prefix_hits(server, target, guard.window, now)
        if isinstance(guard, SpecDecodeGuard):
            return self.spec_acceptance(server, target, guard.window, now)
        r = self.contradiction(target, name, guard.window, now)
        return {"": r} if r is not None else {}

    def _guardrail_families(self, now: float, server: ServerWindowsLike) -> list[Metric]:
        value, evidence, threshold = GUARD_VALUE.gauge(), GUARD_EVIDENCE.gauge(), GUARD_THRESHOLD.gauge()
        for target, spec in sorted(self._guards.items()):
            for name, guard in spec.enabled().items():
                threshold.add_metric([target, name], limit(guard))
                for model, r in sorted(self.readings(target, name, guard, server, now).items()):
                    evidence.add_metric([target, model, name], r.evidence)
                    if r.value is not None and r.evidence >= minimum(guard, r):
                        value.add_metric([target, model, name], r.value)
        return [value, evidence, threshold]


def limit(guard: GuardBase) -> float:
    """Return the threshold a guardrail's alert compares its value with."""
    if isinstance(guard, PrefixCacheGuard | SpecDecodeGuard):
        return guard.below
    assert isinstance(guard, BusyGpuEmptyQueueGuard | IdleGpuDeepQueueGuard)
    return guard.share


def minimum(guard: GuardBase, r: Reading) -> float:
    """Return the evidence a reading needs before its value is judged."""
    if isinstance(guard, PrefixCacheGuard):
        return guard.min_tokens
    if isinstance(guard, SpecDecodeGuard):
        return MIN_GAUGE_READINGS if r.unit == "scrapes" else guard.min_tokens
    assert isinstance(guard, BusyGpuEmptyQueueGuard | IdleGpuDeepQueueGuard)
    return float(guard.min_readings)
