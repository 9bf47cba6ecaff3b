"""Route firing alerts to notifiers by label and group them as Alertmanager does (pure functions).

Two deliberate differences from Alertmanager, both so that no page is lost: an alert that joins a group which
has already notified is sent after `group_wait` (Alertmanager holds it for the group's next `group_interval`
tick), and an alert that fired and resolved before its group was flushed is still sent, as resolved. Built-in
inhibition as the generated Alertmanager example's: a ticket is held while a page of the same SLO and SLI fires.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from sloguard.alerts.engine import Alert, Labels
from sloguard.config.notifiers import AlertmanagerNotifierSpec, NotifierSpec


@dataclass(frozen=True, slots=True)
class Notification:
    """One message to one notifier: a group's firing alerts and, if wanted, its newly resolved ones."""

    notifier: str
    group_key: str
    status: Literal["firing", "resolved"]
    group_labels: Labels
    alerts: tuple[Alert, ...]
    created_at: float


@dataclass(frozen=True)
class Group:
    """A notifier's alerts sharing the `group_by` label values, with what was last notified."""

    notifier: str
    key: str
    labels: Labels
    alerts: Mapping[str, Alert]  # fingerprint -> alert; resolved ones carry resolved_at
    next_flush: float
    last_sent_at: float | None = None
    sent_firing: frozenset[str] = field(default_factory=frozenset)


def matches(spec: NotifierSpec, labels: Mapping[str, str]) -> bool:
    """Return whether every `match` label of a notifier has one of its listed values."""
    return all(labels.get(k) in vs for k, vs in spec.match.items())


def am_group_key(notifier: str) -> str:
    """Return the key of an Alertmanager notifier's single group (keys are global across notifiers)."""
    return f"{notifier}/all"


def _group_of(spec: NotifierSpec, alert: Alert) -> tuple[str, Labels]:
    labels = dict(alert.labels)
    if isinstance(spec, AlertmanagerNotifierSpec):
        # Alertmanager groups by itself: send everything, every resend_interval; one group per notifier.
        return am_group_key(spec.name), ()
    glabels = tuple((k, labels.get(k, "")) for k in sorted(spec.group_by))
    digest = hashlib.sha256(repr(glabels).encode()).hexdigest()[:12]
    return f"{spec.name}/{digest}", glabels


INHIBIT_SOURCE, INHIBIT_TARGET, INHIBIT_EQUAL = "page", "ticket", ("slo", "sli")


def inhibited(firing: Sequence[Alert]) -> frozenset[str]:
    """Return the fingerprints of tickets held because a page of the same SLO and SLI fires."""
    def key(a: Alert) -> tuple[str, ...] | None:
        lab = dict(a.labels)
        return tuple(lab.get(k, "") for k in INHIBIT_EQUAL) if lab.get("slo") else None
    pages = {key(a) for a in firing if dict(a.labels).get("severity") == INHIBIT_SOURCE} - {None}
    return frozenset(a.fingerprint for a in firing
                     if dict(a.labels).get("severity") == INHIBIT_TARGET and key(a) in pages)


def _absorb(spec: NotifierSpec, groups: dict[str, Group], firing: Sequence[Alert], now: float,
            held: frozenset[str] = frozenset()) -> None:
    """Add firing alerts to their groups; mark alerts that stopped firing as resolved now.

    A new alert in a group flushes it after group_wait at the latest. `held` (inhibited) alerts join no group
    and, where already in one, stay as they are.
    """
    current: dict[str, dict[str, Alert]] = {}
    am = isinstance(spec, AlertmanagerNotifierSpec)
    wait = 0.0 if am else spec.group_wait
    for a in firing:
        if not matches(spec, dict(a.labels)) or a.fingerprint in held:
            continue
        key, glabels = _group_of(spec, a)
        if key not in groups:
            groups[key] = Group(spec.name, key, glabels, {}, now + wait)
        elif a.fingerprint not in groups[key].alerts or groups[key].alerts[a.fingerprint].resolved_at is not None:
            groups[key] = replace(groups[key], next_flush=min(groups[key].next_flush, now + wait))
        current.setdefault(key, {})[a.fingerprint] = a
    for key, g in list(groups.items()):
        alerts = dict(g.alerts)
        for fp, old in g.alerts.items():
            if fp not in current.get(key, {}) and old.resolved_at is None and fp not in held:
                alerts[fp] = replace(old, resolved_at=now)
        alerts.update(current.get(key, {}))
        groups[key] = replace(g, alerts=alerts)


def _unsent(g: Group) -> dict[str, Alert]:
    """Return alerts that fired and resolved before the group told anyone: sent once, as resolved."""
    return {fp: a for fp, a in g.alerts.items() if a.resolved_at is not None and fp not in g.sent_firing}


def _due_grouped(spec: NotifierSpec, g: Group, now: float) -> bool:
    firing = {fp for fp, a in g.alerts.items() if a.resolved_at is None}
    newly_resolved = bool(g.sent_firing - firing) and spec.send_resolved
    repeat = bool(firing) and g.last_sent_at is not None and now - g.last_sent_at >= spec.repeat_interval
    return bool(firing - g.sent_firing) or newly_resolved or repeat or bool(_unsent(g))


def _changed(g: Group) -> bool:
    return {fp for fp, a in g.alerts.items() if a.resolved_at is None} != g.sent_firing


def _due_resend(spec: AlertmanagerNotifierSpec, g: Group, now: float) -> bool:
    return _changed(g) or ((g.last_sent_at is None or now - g.last_sent_at >= spec.resend_interval) and bool(g.alerts))


def _interval(spec: NotifierSpec) -> float:
    return spec.resend_interval if isinstance(spec, AlertmanagerNotifierSpec) else spec.group_interval


def _flush(spec: NotifierSpec, g: Group, now: float) -> tuple[Group | None, Notification]:
    firing = tuple(a for a in g.alerts.values() if a.resolved_at is None)
    resolved = tuple(a for fp, a in g.alerts.items() if a.resolved_at is not None and fp in g.sent_firing)
    if isinstance(spec, AlertmanagerNotifierSpec):
        resolved = tuple(a for a in g.alerts.values()
                         if a.resolved_at is not None and now - a.resolved_at <= spec.resolved_resend_for)
        keep = {a.fingerprint: a for a in (*firing, *resolved)}
    else:
        keep = {a.fingerprint: a for a in firing}
        resolved = (resolved if spec.send_resolved else ()) + tuple(_unsent(g).values())
    note = Notification(spec.name, g.key, "firing" if firing else "resolved", g.labels,
                        tuple(sorted((*firing, *resolved), key=lambda a: a.labels)), now)
    new = replace(g, alerts=keep, next_flush=now + _interval(spec), last_sent_at=now,
                  sent_firing=frozenset(a.fingerprint for a in firing))
    return (new if keep else None), note


def route(specs: Sequence[NotifierSpec], groups: Mapping[str, Group], firing: Sequence[Alert],
          now: float) -> tuple[dict[str, Group], list[Notification]]:
    """Return the new groups and the notifications due at `now` (at most one per group per flush).

    Alertmanager notifiers get every alert (Alertmanager inhibits with its own rules); the others hold tickets
    while their page fires (inhibited()).
    """
    out: dict[str, Group] = {}
    notes: list[Notification] = []
    held = inhibited(firing)
    for spec in specs:
        mine = {k: g for k, g in groups.items() if g.notifier == spec.name}
        am = isinstance(spec, AlertmanagerNotifierSpec)
        _absorb(spec, mine, firing, now, frozenset() if am else held)
        for key, g in mine.items():
            # Alertmanager does its own grouping: like Prometheus, tell it about a change at once.
            if now < g.next_flush and not (am and _changed(g)):
                out[key] = g
                continue
            if not (_due_resend(spec, g, now) if isinstance(spec, AlertmanagerNotifierSpec)
                    else _due_grouped(spec, g, now)):
                # Nothing to say: the timer restarts, as Alertmanager's group_interval timer does.
                kept = dict(g.alerts) if am else {fp: a for fp, a in g.alerts.items() if a.resolved_at is None}
                if kept:
                    out[key] = replace(g, alerts=kept, next_flush=now + _interval(spec))
                continue
            new, note = _flush(spec, g, now)
            if note.alerts:
                notes.append(note)
            if new is not None:
                out[key] = new
    return out, notes
