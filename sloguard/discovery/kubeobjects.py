"""Pods and EndpointSlices (lightkube's typed models) as targets, with Prometheus's `__meta_kubernetes_*` labels.

Pure. Every value comes from the API server, a peer: names and values are bounded (sloguard.untrusted), label
names are sanitised as Prometheus does (`app.kubernetes.io/name` -> `app_kubernetes_io_name`), and an object that
breaks a bound is dropped and counted, never raised into the watch. The annotations (or labels)
`sloguard.io/model` and `sloguard.io/engine` become the target labels `model` and `engine`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from sloguard.config.fleet import DiscoverySpec
from sloguard.discovery import groups
from sloguard.discovery.groups import Target
from sloguard.untrusted import Invalid, bounded, reject, text

_BAD = re.compile(r"[^a-zA-Z0-9_]")
META = "__meta_kubernetes_"
KEYS = {"sloguard.io/model": "model", "sloguard.io/engine": "engine"}


def sanitise(name: str) -> str:
    """Return a Kubernetes label or annotation name as a Prometheus label name."""
    return _BAD.sub("_", name)


def _kv(prefix: str, items: Mapping[str, str] | None) -> dict[str, str]:
    items = items or {}
    bounded(items, limit=groups.MAX_LABELS, what=prefix)
    return {f"{META}{prefix}_{sanitise(text(k, limit=316))}": text(v, limit=groups.MAX_VALUE, what=k)
            for k, v in items.items()}


def _plain(labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None) -> dict[str, str]:
    out = {sanitise(text(k, limit=316)): text(v, limit=groups.MAX_VALUE) for k, v in (labels or {}).items()}
    for key, dest in KEYS.items():
        for source in (labels or {}, annotations or {}):
            if key in source:
                out[dest] = text(source[key], limit=groups.MAX_VALUE)
    out.pop("sloguard_io_model", None)
    out.pop("sloguard_io_engine", None)
    return out


def _ready(pod: Any) -> bool:
    conds = getattr(pod.status, "conditions", None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conds)


def pod_targets(pod: Any, spec: DiscoverySpec) -> list[Target]:
    """Return the pod's target for the named container port (none while not running, not ready or no IP)."""
    kube = spec.kubernetes
    assert kube is not None
    status, meta = pod.status, pod.metadata
    if status is None or status.phase != "Running" or not status.podIP or (kube.ready_only and not _ready(pod)):
        return []
    out = []
    for c in pod.spec.containers or []:
        for p in c.ports or []:
            if p.name != kube.port:
                continue
            found = {f"{META}namespace": text(meta.namespace or ""), f"{META}pod_name": text(meta.name or ""),
                     f"{META}pod_node_name": text(pod.spec.nodeName or ""), f"{META}pod_ip": text(status.podIP),
                     f"{META}pod_container_name": text(c.name), f"{META}pod_container_port_name": text(p.name),
                     f"{META}pod_ready": "true" if _ready(pod) else "false",
                     **_kv("pod_label", meta.labels), **_kv("pod_annotation", meta.annotations),
                     **_plain(meta.labels, meta.annotations),
                     "namespace": text(meta.namespace or ""), "pod": text(meta.name or ""),
                     "node": text(pod.spec.nodeName or "")}
            host = f"[{status.podIP}]" if ":" in status.podIP else status.podIP
            out.append(groups.make(spec, groups.address(f"{host}:{p.containerPort}"), found))
    return out


def slice_targets(es: Any, spec: DiscoverySpec) -> list[Target]:
    """Return the ready endpoints of an EndpointSlice on the named port (on `node` only, where set)."""
    kube = spec.kubernetes
    assert kube is not None
    port = next((p.port for p in es.ports or [] if p.name == kube.port and p.port), None)
    if port is None:
        return []
    meta = es.metadata
    service = (meta.labels or {}).get("kubernetes.io/service-name", "")
    out = []
    for ep in es.endpoints or []:
        ready = ep.conditions is None or ep.conditions.ready is not False
        if (kube.ready_only and not ready) or (kube.node and ep.nodeName != kube.node):
            continue
        ref = ep.targetRef
        pod = ref.name if ref is not None and ref.kind == "Pod" else ""
        for addr in ep.addresses[:1]:
            found = {f"{META}namespace": text(meta.namespace or ""), f"{META}endpointslice_name": text(meta.name or ""),
                     f"{META}service_name": text(service), f"{META}pod_name": text(pod or ""),
                     f"{META}endpoint_node_name": text(ep.nodeName or ""),
                     **_kv("endpointslice_label", meta.labels), **_plain({}, meta.annotations),
                     "namespace": text(meta.namespace or ""), "service": text(service), "pod": text(pod or ""),
                     "node": text(ep.nodeName or "")}
            host = f"[{addr}]" if ":" in addr else addr
            out.append(groups.make(spec, groups.address(f"{host}:{port}"), found))
    return out


def targets(objects: Iterable[Any], spec: DiscoverySpec) -> list[Target]:
    """Return every object's targets, dropping (and counting) the objects that break a bound."""
    convert = pod_targets if spec.kubernetes is not None and spec.kubernetes.role == "pod" else slice_targets
    out: list[Target] = []
    for obj in objects:
        try:
            out.extend(convert(obj, spec))
        except (Invalid, AttributeError, TypeError) as exc:
            reason = exc.reason if isinstance(exc, Invalid) else "bad_object"
            reject(groups.SOURCE, reason, f"{spec.name}: {type(exc).__name__}: {exc}")
    return out[: spec.max_targets]
