"""Replica: one scraped instance of a service, static (config) or discovered; how a service's list is formed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sloguard.config.spec import ServiceSpec
    from sloguard.discovery.groups import Target

ENGINES = frozenset({"vllm", "sglang", "tgi", "triton", "llamacpp", "trtllm"})  # scrapeable engines a label may name
_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Replica:
    """One replica of a service: its `replica` label, /metrics URL, engine and model where it says, its labels."""

    service: str
    name: str
    metrics_url: str
    engine: str = ""  # "" = the service's
    model: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    origin: str = "static"  # "static" or the discovery's name


def _name(t: Target) -> str:
    return t.labels.get("replica") or t.meta.get("__meta_kubernetes_pod_name") or t.address


def from_target(service: str, origin: str, t: Target) -> Replica:
    """Return a discovered target as a replica of `service` (its `replica`, `model`, `engine` labels honoured)."""
    engine = t.labels.get("engine", "")
    return Replica(service, _name(t), t.metrics_url, engine if engine in ENGINES else "", t.labels.get("model", ""),
                   MappingProxyType(dict(t.labels)), origin)


def service_replicas(spec: ServiceSpec, found: Sequence[Target] | None) -> tuple[list[Replica], int]:
    """Return a service's replicas (static first, then discovered ones matching `match`) and how many were dropped.

    Dropped: over max_replicas, or a discovered replica whose name a replica before it already has.
    """
    out = [Replica(spec.name, r.name, r.metrics_url) for r in spec.replicas]
    for t in found or ():
        if all(t.labels.get(k) == v for k, v in spec.match.items()):
            out.append(from_target(spec.name, spec.discovery or "", t))
    seen: set[str] = set()
    kept: list[Replica] = []
    for r in out:
        if r.name not in seen and len(kept) < spec.max_replicas:
            seen.add(r.name)
            kept.append(r)
    return kept, len(out) - len(kept)
