"""The daemon's diagnosis: after each SLO evaluation, one verdict per SLO, its series, JSON and alert text.

State: per SLO the healthy baselines; per target and process the gauge and counter series the signals
need. Everything else is recomputed from the windows the SLO engine and the server windows already keep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

from prometheus_client.metrics_core import Metric

from sloguard.config.spec import Config
from sloguard.config.units import format_duration
from sloguard.diagnose import inputs, prompts, signals
from sloguard.diagnose.arrivals import ProbeLoad
from sloguard.diagnose.confirm import Confirmer
from sloguard.diagnose.engine import candidates, holding, sure
from sloguard.diagnose.history import Baselines, Series
from sloguard.diagnose.model import STAGES, Inputs, Verdict
from sloguard.diagnose.model import ServerLike as DiagnosisServer
from sloguard.diagnose.replicas import ReplicaServer, replica_signals
from sloguard.diagnose.text import as_json, evidence_lines, line
from sloguard.families import declare
from sloguard.model import ProbeResult, Sample
from sloguard.slo.evaluate import ServerReader, ServerWindowsLike
from sloguard.slo.result import SLOStatus
from sloguard.slo.stages import STAGE_QS
from sloguard.sources.engines.capabilities import capability, cpu_is_compute
from sloguard.windows.probe import ProbeWindow

# Counts since an event and a score against a baseline already: no healthy level of their own to learn.
UNLEARNED = frozenset({"engine_restarts", "cold_starts", "arrival_surge_z", "engine_gpu_backed", "processes_down",
                       "queue_from_head"})
BOTTLENECK = declare("sloguard_bottleneck_info", "gauge", "Where the time goes and why, per SLO: 1 for the current "
                     "verdict (stage none and cause none while no objective is breached).", ("slo", "stage", "cause"))
CONFIDENCE = declare("sloguard_bottleneck_confidence_ratio", "gauge", "Confidence of the current verdict (0 for "
                     "unknown, 1 while healthy).", ("slo",))
EXCESS = declare("sloguard_stage_excess_seconds", "gauge", "Stage p95 over the diagnosis window minus the stage's own "
                 "healthy baseline (0 when not above it).", ("slo", "stage", "window"))


class WindowsLike(Protocol):
    def windows(self, slo: str) -> dict[str, ProbeWindow]:
        """Return an SLO's probe windows by segment."""
        ...


class ServerLike(DiagnosisServer, ServerWindowsLike, Protocol):
    """The server windows: histograms for stages, counters and gauges for signals."""


class Diagnoser:
    """One verdict per SLO after every evaluation (sloguard.diagnose.engine); not thread-safe (event loop)."""

    def __init__(self, cfg: Config) -> None:
        self.verdicts: dict[str, Verdict] = {}
        self._baselines: dict[str, Baselines] = {}
        self._excess: dict[str, dict[str, float]] = {}
        self._seen: dict[str, dict[str, dict[str, float | None]]] = {}  # slo -> signal -> value and baseline
        self._confirm = Confirmer()
        self.series = Series(horizon=cfg.diagnose.restart_hold + cfg.diagnose.window)
        self.probes = ProbeLoad(horizon=2 * cfg.diagnose.window)  # sloguard's own requests, not the users'
        self.reconfigure(cfg)

    def reconfigure(self, cfg: Config) -> None:
        """Adopt a new config; baselines of SLOs that still exist are kept."""
        spec = cfg.diagnose
        self.enabled, self.window, self.hold = spec.enabled, spec.window, spec.restart_hold
        self.series.horizon = spec.restart_hold + spec.window
        self.probes.horizon = 2 * spec.window  # a window's span starts at the scrape before it
        self.probes.forget(t.name for t in cfg.targets)
        names = {s.name for s in cfg.slos}
        self._baselines = {n: b for n, b in self._baselines.items() if n in names}
        for b in self._baselines.values():
            b.horizon, b.min_span, b.adopt = spec.baseline, spec.window, spec.baseline / 4
        self._horizon = spec.baseline
        self.verdicts = {n: v for n, v in self.verdicts.items() if n in names}
        self._seen = {n: v for n, v in self._seen.items() if n in names}
        self._confirm.forget(names)
        self.targets: dict[str, tuple[str, str]] = {t.name: (t.engine, t.device) for t in cfg.targets}
        single = cfg.targets[0].name if len(cfg.targets) == 1 else None
        self.processes: dict[str, list[str]] = {}
        for p in cfg.host.processes:
            target = p.target or single
            if target is not None:
                self.processes.setdefault(target, []).append(p.name)

    def observe_probes(self, started: Sequence[tuple[str, float]], now: float,
                       results: Sequence[ProbeResult] = (),
                       live: Sequence[tuple[str, str, float, int]] = ()) -> None:
        """Record the probes' own requests: (target, wall time) as each starts, each first token as it comes (live:
        target, trace id, wall time, nominal prompt tokens) and each result's prefill."""
        self.probes.observe(started, now, [(r.target, r.ts + r.ttft_s if r.ttft_s is not None else None,
                                            r.prompt_tokens, r.trace_id) for r in results], live)

    def step(self, now: float, statuses: Sequence[SLOStatus], engine: WindowsLike, server: ServerLike | None,
             samples: Sequence[Sample]) -> None:
        """Decide every SLO's verdict at `now` from its windows, the server windows and the evaluated samples."""
        if not self.enabled:
            self.verdicts = {}
            return
        idx = signals.index(samples)
        signals.record_host(self.series, idx, now)
        targets = {st.slo.target for st in statuses}
        if server is not None:
            for target in targets:
                signals.record_engine(self.series, server, target)
        for st in statuses:
            self.verdicts[st.slo.name] = self._one(now, st, engine, server, idx)

    def _signals(self, target: str, server: ServerLike | None, samples: Mapping[str, Sequence[Sample]],
                 now: float, user_rate: tuple[float, float] | None) -> tuple[dict[str, float], dict[str, str]]:
        out: dict[str, float] = {}
        if server is not None:
            out |= signals.engine_signals(self.series, server, target, self.window, self.hold, now, self.probes,
                                          user_rate)
        host, notes = signals.host_signals(self.series, self.processes.get(target, []), self.window, self.hold, now)
        gpu, gpu_notes = signals.gpu_signals(samples, target)
        if server is not None and hasattr(server, "replica_histograms"):  # a service's replicas (sloguard.fleet)
            rep, rep_notes = replica_signals(self.series, cast(ReplicaServer, server), target, self.window,
                                             self.hold, now)
            out, notes = out | rep, notes | rep_notes
        configured, device = self.targets.get(target, ("auto", "auto"))
        view = server.latest(target) if server is not None and configured == "auto" else None
        engine: str = view.engine if view is not None else configured
        compute = cpu_is_compute(engine, device, gpu_seen=bool(gpu))
        out["engine_gpu_backed"] = 0.0 if compute else 1.0
        out["queue_from_head"] = 1.0 if capability(engine).head == "slot_start" else 0.0
        notes["engine_gpu_backed"] = f"{engine}: its process CPU is {'the model compute' if compute else 'host work'}"
        return out | host | gpu, notes | gpu_notes

    def _one(self, now: float, st: SLOStatus, engine: WindowsLike, server: ServerLike | None,
             samples: Mapping[str, Sequence[Sample]]) -> Verdict:
        slo = st.slo
        probe = None
        if slo.source == "probe":
            found = engine.windows(slo.name).get("")
            probe = None if found is None else found.view(self.window, now)
        reader = ServerReader(server, slo.target, self.window, now) if server is not None else None
        q, sources = inputs.quantiles(slo, probe, reader, self.window)
        q = inputs.censor(q, sources, probe)
        base = self._baselines.setdefault(
            slo.name, Baselines(self._horizon, min_span=self.window, means=prompts.MEAN_BASELINES))
        spans = {k: s for k in prompts.PROMPT_SIGNALS if (s := base.span(k)) is not None}
        learned, young = prompts.settled(base.all(), spans, self.window)
        users = learned.get("user_request_rate")
        over = base.span("user_request_rate")  # each healthy value counted a window: the baseline counted span + window
        sig, notes = self._signals(slo.target, server, samples, now,
                                   None if users is None or over is None else (users, over + self.window))
        notes |= {k: v for k, v in young.items() if k in sig}
        if "network" in sources:
            sig["network_measured"] = 1.0 if sources["network"] == "request" else 0.0
        found_breaches = inputs.breaches(st, q, sources)
        at = max(found_breaches, key=lambda b: b.severity).quantile if found_breaches else 0.95
        readings = inputs.readings(q, sources, at, learned, slo.budgets, inputs.gaps(probe, sources))
        self._excess[slo.name] = {s: r.excess for s, r in inputs.readings(q, sources, 0.95, learned, {}).items()
                                  if r.excess is not None}
        inp = Inputs(slo.name, now, self.window, found_breaches, readings, sig, learned, notes)
        self._seen[slo.name] = {k: {"value": v, "baseline": learned.get(k)} for k, v in sorted(sig.items())}
        verdict = self._confirm.publish(candidates(inp), self.verdicts.get(slo.name), holding(inp), sure(inp))
        if not any(b.recent for b in found_breaches):  # the diagnosis window itself is healthy
            base.record(now, {**inputs.healthy_values(q), **{k: v for k, v in sig.items()
                                                             if k not in UNLEARNED}})
        return verdict

    def learning(self, slo: str, wholes: Sequence[str]) -> float:
        """Return the seconds until the SLO's baselines for `wholes` (its objectives' metrics, at p95) are learned.

        0 once they are, or with the diagnosis off. A baseline is learned from healthy evaluations only.
        """
        if not self.enabled:
            return 0.0
        base = self._baselines.get(slo)
        keys = [inputs.key(w, 0.95) for w in wholes]
        if base is None:
            return self.window
        return base.ready_in(keys)

    def families(self) -> list[Metric]:
        """Return sloguard_bottleneck_info, sloguard_stage_excess_seconds and the verdict confidence."""
        info, conf, excess = BOTTLENECK.gauge(), CONFIDENCE.gauge(), EXCESS.gauge()
        window = format_duration(self.window)
        for name, v in sorted(self.verdicts.items()):
            info.add_metric([name, v.stage, v.cause], 1.0)
            conf.add_metric([name], v.confidence)
            for stage, value in sorted(self._excess.get(name, {}).items()):
                if stage in STAGES:
                    excess.add_metric([name, stage, window], value)
        return [info, conf, excess]

    def json(self, slo: str) -> dict[str, Any] | None:
        """Return the SLO's verdict as JSON, or None when there is none (diagnosis off, not evaluated yet)."""
        v = self.verdicts.get(slo)
        return None if v is None else {**as_json(v), "window": format_duration(self.window),
                                       "evidence_text": evidence_lines(v), "signals": self._seen.get(slo, {})}

    def decorate(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """Return the /api/v1/slos document with each SLO's `diagnosis`."""
        slos = [{**s, "diagnosis": self.json(str(s.get("name")))} for s in doc.get("slos", [])]
        return {**doc, "slos": slos}

    def annotations(self, labels: Mapping[str, str]) -> dict[str, str]:
        """Return the verdict annotations of an alert about an SLO (`slo` label); {} for any other alert."""
        v = self.verdicts.get(labels.get("slo", ""))
        if v is None:
            return {}
        if v.healthy:
            text = f"none: no objective breached over the last {format_duration(self.window)}"
            return {"diagnosis": text, "diagnosis_stage": "none", "diagnosis_cause": "none"}
        return {"diagnosis": line(v), "diagnosis_evidence": "\n".join(evidence_lines(v)),
                "diagnosis_stage": v.stage, "diagnosis_cause": v.cause}


__all__ = ["STAGE_QS", "Diagnoser"]
