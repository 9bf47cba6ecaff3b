"""Prometheus target groups (`[{"targets": ["host:port"], "labels": {...}}]`) validated into Target values.

Discovery answers are peer data (sloguard.untrusted): a group that breaks the format is dropped and counted
(`sloguard_invalid_input_total{source="discovery"}`); an answer that is not a list of groups, or holds more
targets than `max_targets`, fails the refresh whole, and the last good list stays.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sloguard.config.fleet import DiscoverySpec
from sloguard.untrusted import Invalid, bounded, reject, text

ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]{0,252}):([0-9]{1,5})$")
LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,127}$")
PATH = re.compile(r"^/[A-Za-z0-9/._~%!$&'()*+,;=:@-]{0,1023}$")
MAX_LABELS = 64
MAX_VALUE = 1024
SOURCE = "discovery"
_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Target:
    """One discovered target: its address, target labels (shown, matched) and meta labels (`__`-prefixed)."""

    address: str
    metrics_url: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    meta: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


def address(value: object) -> str:
    """Return a valid host:port, or raise Invalid."""
    got = text(value, limit=260, what="target address")
    m = ADDRESS.match(got)
    if m is None or not 0 < int(m.group(2)) < 65536:
        raise Invalid("bad_address", got[:64])
    return got


def labels(value: object) -> dict[str, str]:
    """Return a label set with valid names and bounded values, or raise Invalid."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid("bad_labels", "labels must be an object")
    bounded(value, limit=MAX_LABELS, what="labels")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not LABEL.match(k):
            raise Invalid("bad_label_name", str(k)[:64])
        out[k] = text(v, limit=MAX_VALUE, what=f"label {k}")
    return out


def make(spec: DiscoverySpec, addr: str, found: Mapping[str, str]) -> Target:
    """Return a Target from an address and every label found (target labels and `__meta_*`), mapped by `spec`."""
    plain = {k: v for k, v in found.items() if not k.startswith("__")}
    meta = {k: v for k, v in found.items() if k.startswith("__")}
    for dest, src in spec.labels.items():
        if src in found:
            plain[dest] = found[src]
    scheme = meta.get("__scheme__", spec.scheme)
    path = meta.get("__metrics_path__", spec.metrics_path)
    if scheme not in ("http", "https") or not PATH.match(path):
        raise Invalid("bad_scheme_or_path", f"{scheme}://…{path[:32]}")
    return Target(addr, f"{scheme}://{addr}{path}", MappingProxyType(plain), MappingProxyType(meta))


def parse(doc: object, spec: DiscoverySpec) -> list[Target]:
    """Return the targets of a target-group list; raise Invalid when the answer as a whole is unusable."""
    if not isinstance(doc, list):
        raise Invalid("not_target_groups", "expected a JSON/YAML list of target groups")
    bounded(doc, limit=spec.max_targets, what="target groups")
    out: list[Target] = []
    for group in doc:
        try:
            out.extend(_group(group, spec))
        except Invalid as exc:
            if exc.reason == "too_many":
                raise  # a list over max_targets fails whole: half of it would be a wrong list
            reject(SOURCE, exc.reason, f"{spec.name}: {exc}")
        if len(out) > spec.max_targets:
            raise Invalid("too_many", f"more than {spec.max_targets} targets")
    return out


def _group(group: object, spec: DiscoverySpec) -> list[Target]:
    if not isinstance(group, dict) or not isinstance(group.get("targets"), list):
        raise Invalid("bad_group", "a group needs a `targets` list")
    common = labels(group.get("labels"))
    bounded(group["targets"], limit=spec.max_targets, what="targets")
    return [make(spec, address(a), common) for a in group["targets"]]
