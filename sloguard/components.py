"""Build everything a config describes, fully, before the daemon swaps it in (reload is all or nothing)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sloguard.clock import Clock
from sloguard.config.secrets import Secrets
from sloguard.config.spec import Config
from sloguard.fleet.replica import Replica
from sloguard.slo.model import SLO
from sloguard.sources.base import Source


def startup_grace(cfg: Config) -> float:
    """Return how long after start every input series should have been collected at least once."""
    intervals = [t.scrape_interval for t in cfg.targets] + [p.interval for p in cfg.probes] + [cfg.gpu.interval]
    return max(2 * max(intervals, default=0.0), 3 * cfg.evaluation_interval)


def history_horizon(slos: Sequence[SLO]) -> float:
    """Return how far back probe results are needed to refill every SLO window."""
    return max((s.window for s in slos), default=0.0)


def server_horizon(slos: Sequence[SLO]) -> float:
    """Return how long server-side history must reach back: the longest server SLO window, at least 15 min."""
    return max([900.0, *(s.window for s in slos if s.source == "server")])


# A planned source: an identity key (its kind, target and every setting it was built from, secrets hashed)
# and a factory. A reload reuses a running source whose key is unchanged, so it keeps its state (restart
# baselines, cold-start counts, NVML event sets).
Planned = tuple[str, Callable[[], Source]]
SourceBuilder = Callable[[Config, Secrets, Clock], list[Planned]]


def _key(kind: str, *parts: object) -> str:
    return kind + "|" + "|".join(p.model_dump_json() if hasattr(p, "model_dump_json") else str(p) for p in parts)


def _secret_digest(value: str | None) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16] if value else ""


def _scrape_sources(cfg: Config, secrets: Secrets, clock: Clock) -> list[Planned]:
    from sloguard.sources.scrape import ScrapeSource

    return [(_key("scrape", t, _secret_digest(secrets.targets.get(t.name))),
             lambda t=t: ScrapeSource(t, clock=clock, secrets=secrets.targets))  # type: ignore[misc]
            for t in cfg.targets if t.metrics_url]


def _dcgm_sources(cfg: Config, secrets: Secrets, clock: Clock) -> list[Planned]:
    from sloguard.gpu.dcgm_source import DcgmSource

    return [(_key("dcgm", t), lambda t=t: DcgmSource(t, clock=clock))  # type: ignore[misc]
            for t in cfg.targets if t.dcgm_url]


def _nvml_sources(cfg: Config, secrets: Secrets, clock: Clock) -> list[Planned]:
    from sloguard.gpu.nvml import NVMLSource, nvml_enabled

    if not nvml_enabled(cfg.gpu):
        return []
    return [(_key("nvml", cfg.gpu, *cfg.host.processes), lambda: NVMLSource(cfg.gpu, cfg.host.processes, clock=clock))]


def _host_sources(cfg: Config, secrets: Secrets, clock: Clock) -> list[Planned]:
    from sloguard.sources.host import HostSource

    return [(_key("host", cfg.host), lambda: HostSource(cfg.host, clock=clock))] if cfg.host.processes else []


def _canary_sources(cfg: Config, secrets: Secrets, clock: Clock) -> list[Planned]:
    if not cfg.gpu.canary.enabled:
        return []
    from sloguard.gpu.canary import CanarySource

    return [(_key("canary", cfg.gpu.canary, cfg.state_dir),
             lambda: CanarySource(cfg.gpu.canary, Path(cfg.state_dir), clock=clock))]


def _identity_sources(cfg: Config, secrets: Secrets, clock: Clock) -> list[Planned]:
    if not cfg.reports.enabled:
        return []
    from sloguard.reports.identity import IdentitySource

    # keyed without the labels: a label change is a release boundary, not a reason to restart the reader
    return [(_key("identity", t.name, t.api_url, t.engine, cfg.reports.identity_interval,
                  _secret_digest(secrets.targets.get(t.name))),
             lambda t=t: IdentitySource(t.name, t.api_url or "", t.engine,  # type: ignore[misc]
                                        secrets.targets.get(t.name), cfg.reports.identity_interval))
            for t in cfg.targets if t.api_url]


# The SOURCES table: a new source kind is one builder here.
SOURCES: dict[str, SourceBuilder] = {
    "scrape": _scrape_sources,
    "nvml": _nvml_sources,
    "host": _host_sources,
    "canary": _canary_sources,
    "identity": _identity_sources,
    "dcgm": _dcgm_sources,
}


def _replica_scrapes(cfg: Config, secrets: Secrets, clock: Clock,
                     replicas: Mapping[str, Sequence[Replica]]) -> list[Planned]:
    """Plan one scrape per replica of each service: the service's settings, the replica's URL and engine."""
    from sloguard.sources.scrape import ScrapeSource

    out: list[Planned] = []
    for svc in cfg.services:
        digest = _secret_digest(secrets.targets.get(svc.name))
        for r in replicas.get(svc.name, ()):
            spec = svc.model_copy(update={"metrics_url": r.metrics_url, "engine": r.engine or svc.engine})
            out.append((_key("scrape", svc, r.name, r.metrics_url, r.engine, digest),
                        lambda spec=spec, r=r: ScrapeSource(spec, clock=clock,  # type: ignore[misc]
                                                            secrets=secrets.targets, replica=r.name)))
    return out


def build_sources(cfg: Config, secrets: Secrets, clock: Clock, running: Mapping[str, Source] | None = None,
                  replicas: Mapping[str, Sequence[Replica]] | None = None) -> dict[str, Source]:
    """Return every configured source by identity key, reusing `running` ones whose key is unchanged.

    `replicas`: each service's current replicas (sloguard.fleet.replica.service_replicas), one scrape each.
    """
    running = running or {}
    planned = [p for build in SOURCES.values() for p in build(cfg, secrets, clock)]
    planned += _replica_scrapes(cfg, secrets, clock, replicas or {})
    return {key: running.get(key) or make() for key, make in planned}
