"""Cross-checks of guardrail probes: an abort check reads the target's /metrics; an SLO never judges a check."""

from __future__ import annotations

from collections.abc import Iterable

from sloguard.config.spec import Config, ProbeSpec, SLOSpec, TargetSpec


def check_guard_probes(cfg: Config) -> Iterable[str]:
    """Abort checks need the target's metrics_url; SLOs may only name latency probes (invalid entries skipped)."""
    targets = {t.name: t for t in cfg.targets if isinstance(t, TargetSpec)}
    kinds = {p.name: p.kind for p in cfg.probes if isinstance(p, ProbeSpec)}
    for i, p in enumerate(cfg.probes):
        t = targets.get(p.target) if isinstance(p, ProbeSpec) else None
        if isinstance(p, ProbeSpec) and p.kind == "abort" and t is not None and t.metrics_url is None:
            yield (f"probes[{i}].kind: abort watches the engine's own signals: target {p.target!r} needs "
                   "metrics_url")
    for i, s in enumerate(cfg.slos):
        if isinstance(s, SLOSpec) and s.probe is not None and kinds.get(s.probe, "latency") != "latency":
            yield f"slos[{i}].probe: {s.probe!r} is a guardrail check (kind {kinds[s.probe]}), not a latency probe"
