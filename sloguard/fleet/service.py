"""The daemon's fleet: discoveries feed each service's replicas; a change re-plans scrapes and retires windows."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from prometheus_client.metrics_core import Metric

from sloguard.config.spec import Config
from sloguard.discovery.manager import Discoveries
from sloguard.families import declare
from sloguard.fleet.replica import Replica, service_replicas
from sloguard.sources.scrape import replica_name

log = logging.getLogger("sloguard.fleet")
PLAIN_GRACE = 3600.0  # a plain target's metrics_url changed by a reload: its old windows still count this long


REPLICAS = declare("sloguard_service_replicas", "gauge", "Replicas each service has now (static and discovered); more "
                   "than max_replicas are dropped.", ("target",))

class Retiring(Protocol):
    def retire(self, present: Mapping[str, set[str]], grace: Mapping[str, float], now: float) -> None:
        """Apply the present replicas of each target."""
        ...


class Fleet:
    """Owns the discoveries; `replicas(cfg)` is what the daemon scrapes, `on_change` fires after a discovery changed."""

    def __init__(self, on_change: Callable[[], None]) -> None:
        self.discoveries = Discoveries(on_change)
        self.dropped: dict[str, int] = {}
        self._shown: dict[str, tuple[str, ...]] = {}

    def reconfigure(self, cfg: Config, tokens: Mapping[str, str]) -> None:
        """Start, restart or stop discoveries to match the config."""
        self.discoveries.reconfigure(cfg.discovery, tokens)

    def replicas(self, cfg: Config) -> dict[str, list[Replica]]:
        """Return each service's replicas now (static and discovered); log each service's list when it changes."""
        out: dict[str, list[Replica]] = {}
        for svc in cfg.services:
            found = self.discoveries.found.get(svc.discovery) if svc.discovery else None
            out[svc.name], self.dropped[svc.name] = service_replicas(svc, found)
            names = tuple(r.name for r in out[svc.name])
            if self._shown.get(svc.name) != names:
                log.info("service replicas changed", extra={"service": svc.name, "replicas": len(names),
                                                            "names": ",".join(names[:20])})
                self._shown[svc.name] = names
        return out

    def present(self, cfg: Config) -> dict[str, set[str]]:
        """Return target -> the replica names it has now (a plain target's one replica included)."""
        out = {name: {r.name for r in reps} for name, reps in self.replicas(cfg).items()}
        for t in cfg.targets:
            if t.name not in out and t.metrics_url:
                out[t.name] = {replica_name(t.name, t.metrics_url)}
        return out

    def retire(self, cfg: Config, windows: Retiring, now: float) -> None:
        """Retire vanished replicas' windows (each service's replica_grace; a plain target's old URL: an hour)."""
        grace = {t.name: PLAIN_GRACE for t in cfg.targets} | {svc.name: svc.replica_grace for svc in cfg.services}
        windows.retire(self.present(cfg), grace, now)

    def families(self, cfg: Config) -> list[Metric]:
        """Return sloguard_sd_* and sloguard_service_replicas{target}."""
        fam = REPLICAS.gauge()
        for name, reps in sorted(self.replicas(cfg).items()):
            fam.add_metric([name], len(reps))
        return [*self.discoveries.families(), fam]

    async def close(self) -> None:
        """Stop every discovery."""
        await self.discoveries.close()
