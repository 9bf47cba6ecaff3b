"""Alert state machine (inactive → pending → firing → resolved) as a pure function, Prometheus semantics."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from sloguard.alerts.rules import Rule, render
from sloguard.alerts.template import Lookup
from sloguard.config.expr import Expr, Matcher
from sloguard.model import Sample

Labels = tuple[tuple[str, str], ...]
State = Literal["pending", "firing"]


def fingerprint(labels: Labels) -> str:
    """Return a stable 16-hex-digit identity for a label set."""
    return hashlib.sha256(json.dumps(labels).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert instance: a rule and one label set; times are wall-clock seconds."""

    rule: str
    labels: Labels  # sorted, includes alertname
    annotations: Labels
    state: State
    active_at: float  # first evaluation that saw the condition true (pending since)
    value: float
    fired_at: float | None = None
    keep_since: float | None = None  # first false evaluation while kept firing by keep_firing_for
    resolved_at: float | None = None

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)

    @property
    def name(self) -> str:
        return dict(self.labels).get("alertname", self.rule)


@dataclass(frozen=True, slots=True)
class Transition:
    """A change that notifiers care about: an alert started firing or resolved."""

    kind: Literal["firing", "resolved"]
    alert: Alert


def _by_name(samples: Iterable[Sample]) -> Mapping[str, list[Sample]]:
    index: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        index[s.name].append(s)
    return index


def _labels_of(rule: Rule, series: Mapping[str, str], value: float) -> Labels:
    """Return an instance's labels: the series' labels plus the rule's labels, templated as Prometheus does.

    Rule labels may use `{{ $labels.x }}` and `{{ $value }}`; a label holding `{{ $value }}` makes every
    value change a new alert instance (a new fingerprint), exactly as in Prometheus, so avoid it.
    """
    base = {k: v for k, v in series.items() if k != "__name__"}
    extra = {k: render(v, base, value) for k, v in rule.labels.items()}
    return tuple(sorted({**base, **extra, "alertname": rule.name}.items()))


def _selected(rule: Rule, index: Mapping[str, list[Sample]]) -> list[list[Sample]]:
    return [[s for s in index.get(e.metric, ()) if e.selects(s.name, s.labels)] for e in rule.exprs]


def _clause_value(exprs: Sequence[Expr], index: Mapping[str, list[Sample]]) -> float | None:
    """Return the first expr's value when every expr of a clause holds for some series, else None."""
    value = None
    for i, e in enumerate(exprs):
        hit = next((s for s in index.get(e.metric, ()) if e.selects(s.name, s.labels) and e.holds(s.value)), None)
        if hit is None:
            return None
        value = hit.value if i == 0 else value
    return value


def instances(rule: Rule, index: Mapping[str, list[Sample]]) -> dict[Labels, float]:
    """Return the label sets (with rule labels and alertname) for which the rule's condition holds now."""
    if rule.any_of:
        values = [v for c in rule.any_of if (v := _clause_value(c, index)) is not None]
        return {_labels_of(rule, {}, max(values)): max(values)} if values else {}
    hits = [[s for s in sel if e.holds(s.value)] for e, sel in zip(rule.exprs, _selected(rule, index), strict=True)]
    if len(rule.exprs) == 1:
        return {_labels_of(rule, s.labels, s.value): s.value for s in hits[0]}
    if all(hits):
        return {_labels_of(rule, {}, hits[0][0].value): hits[0][0].value}
    return {}


def present(rule: Rule, index: Mapping[str, list[Sample]]) -> set[Labels]:
    """Return the instance label sets whose input series exist now, whether or not the condition holds."""
    if rule.any_of:
        there = any(all(any(e.selects(s.name, s.labels) for s in index.get(e.metric, ())) for e in c)
                    for c in rule.any_of)
        return {_labels_of(rule, {}, 0.0)} if there else set()
    selected = _selected(rule, index)
    if len(rule.exprs) == 1:
        return {_labels_of(rule, s.labels, s.value) for s in selected[0]}
    return {_labels_of(rule, {}, selected[0][0].value)} if all(selected) else set()


def _lookup(index: Mapping[str, list[Sample]]) -> Lookup:
    """Return the template `query` of one series: the first evaluated sample the selector matches."""
    def find(metric: str, matchers: tuple[Matcher, ...]) -> list[float]:
        return [s.value for s in index.get(metric, ()) if all(m.matches(s.labels) for m in matchers)]
    return find


def _annotate(rule: Rule, labels: Labels, value: float, lookup: Lookup | None = None) -> Labels:
    lab = dict(labels)
    return tuple(sorted((k, render(v, lab, value, lookup)) for k, v in rule.annotations.items()))


def _step_true(rule: Rule, old: Alert | None, labels: Labels, value: float, now: float,
               lookup: Lookup | None = None) -> Alert:
    ann = _annotate(rule, labels, value, lookup)
    a = old or Alert(rule.key, labels, ann, "pending", now, value)
    a = replace(a, annotations=ann, value=value, keep_since=None)
    if a.state == "pending" and now - a.active_at >= rule.for_:
        a = replace(a, state="firing", fired_at=now)
    return a


def _step_false(rule: Rule, a: Alert, now: float) -> Alert | None:
    """Return the alert kept firing by keep_firing_for, or None when it goes away."""
    if a.state == "firing" and rule.keep_firing_for > 0:
        since = now if a.keep_since is None else a.keep_since
        if now - since < rule.keep_firing_for:
            return replace(a, keep_since=since)
    return None


def _step_rule(rule: Rule, mine: dict[Labels, Alert], index: Mapping[str, list[Sample]], now: float,
               hold: Collection[str], out: dict[str, Alert], events: list[Transition]) -> None:
    for labels, value in instances(rule, index).items():
        old = mine.pop(labels, None)
        new = _step_true(rule, old, labels, value, now, _lookup(index))
        if new.state == "firing" and (old is None or old.state == "pending"):
            events.append(Transition("firing", new))
        out[new.fingerprint] = new
    seen = present(rule, index) if hold else set()
    for old in mine.values():
        if old.fingerprint in hold and old.labels not in seen:
            out[old.fingerprint] = old  # startup grace: its series may simply not be collected yet
            continue
        kept = _step_false(rule, old, now)
        if kept is not None:
            out[kept.fingerprint] = kept
        elif old.state == "firing":
            events.append(Transition("resolved", replace(old, resolved_at=now)))


def evaluate(rules: Sequence[Rule], active: Mapping[str, Alert], samples: Iterable[Sample],
             now: float, hold: Collection[str] = ()) -> tuple[dict[str, Alert], list[Transition]]:
    """Return the new active alerts (by fingerprint) and the firing/resolved transitions at `now`.

    `hold`: fingerprints of alerts to keep unchanged (neither resolved nor advanced) while their input
    series are absent from `samples` (a restart's startup grace); present series are evaluated normally.
    """
    index = _by_name(samples)
    out: dict[str, Alert] = {}
    events: list[Transition] = []
    for rule in rules:
        _step_rule(rule, {a.labels: a for a in active.values() if a.rule == rule.key}, index, now, hold, out, events)
    keys = {r.key for r in rules}
    # A rule removed by a reload resolves its firing alerts rather than leaving them open downstream.
    events.extend(Transition("resolved", replace(a, resolved_at=now))
                  for a in active.values() if a.rule not in keys and a.state == "firing")
    return out, events
