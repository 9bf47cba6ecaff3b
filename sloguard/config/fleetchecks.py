"""Cross-checks of the fleet keys: services name existing discoveries, names are unique, HA fits the notifiers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sloguard.config.spec import Config, ServiceSpec

DIRECT = ("slack", "webhook")  # notifiers that reach a person without Alertmanager's deduplication


def check_fleet(cfg: Config) -> Iterable[str]:
    """Every service's discovery exists; names are unique across targets and services; HA mode fits."""
    discovery = list(_named(getattr(cfg, "discovery", [])))
    seen: dict[str, int] = {}
    for i, d in enumerate(discovery):
        if d.name in seen:
            yield f"discovery[{i}].name: duplicate name {d.name!r} (first used at discovery[{seen[d.name]}])"
        seen.setdefault(d.name, i)
    targets = {t.name for t in _named(cfg.targets) if not isinstance(t, ServiceSpec)}
    services: dict[str, int] = {}
    for i, s in enumerate(getattr(cfg, "services", [])):
        if not isinstance(s, ServiceSpec):
            continue
        if s.name in targets:
            yield f"services[{i}].name: {s.name!r} is also a target's name (probes and SLOs name either)"
        elif s.name in services:
            yield f"services[{i}].name: duplicate name {s.name!r} (first used at services[{services[s.name]}])"
        services.setdefault(s.name, i)
        if s.discovery is not None and s.discovery not in seen:
            yield f"services[{i}].discovery: unknown discovery {s.discovery!r}"
        if s.match and s.discovery is None:
            yield f"services[{i}].match: only with discovery"
        if s.scrape_timeout >= s.scrape_interval:
            yield (f"services[{i}].scrape_timeout: must be < scrape_interval "
                   f"({s.scrape_timeout:g}s >= {s.scrape_interval:g}s)")
        if s.api_key_file is not None and s.api_key_env is not None:
            yield f"services[{i}].api_key_file: set api_key_file or api_key_env, not both"
    yield from _check_ha(cfg)


def _check_ha(cfg: Config) -> Iterable[str]:
    ha = getattr(cfg, "ha", None)
    if ha is None or ha.mode != "alertmanager":
        return
    for i, n in enumerate(_named(cfg.notifiers)):
        if getattr(n, "type", "") in DIRECT:
            yield (f"notifiers[{i}]: ha.mode alertmanager: every replica sends, so a direct {n.type} notifier "
                   "would page once per replica; route it through Alertmanager or use ha.mode lease")


def _named(items: Iterable[Any]) -> Iterable[Any]:
    """Yield the items that validated (partial configs hold stand-ins without the model's fields)."""
    return (x for x in items if hasattr(x, "model_fields"))
