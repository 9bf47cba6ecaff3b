"""SQLite persistence of active alerts and notification groups, so a restart neither re-pages nor forgets."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from sloguard.alerts.engine import Alert, Labels
from sloguard.alerts.routing import Group, Notification, am_group_key

SCHEMA = """
CREATE TABLE IF NOT EXISTS alert_active (fingerprint TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS alert_groups (key TEXT PRIMARY KEY, data TEXT NOT NULL);
"""


def _labels(raw: list[list[str]]) -> Labels:
    return tuple((k, v) for k, v in raw)


def alert_to_dict(a: Alert) -> dict[str, Any]:
    """Return a JSON-able dict for an alert."""
    return asdict(a)


def alert_from_dict(d: Mapping[str, Any]) -> Alert:
    """Return the alert a dict from alert_to_dict describes."""
    return Alert(**{**d, "labels": _labels(d["labels"]), "annotations": _labels(d["annotations"])})


def group_to_dict(g: Group) -> dict[str, Any]:
    """Return a JSON-able dict for a group."""
    return {"notifier": g.notifier, "key": g.key, "labels": g.labels, "next_flush": g.next_flush,
            "last_sent_at": g.last_sent_at, "sent_firing": sorted(g.sent_firing),
            "alerts": {fp: alert_to_dict(a) for fp, a in g.alerts.items()}}


def group_from_dict(d: Mapping[str, Any]) -> Group:
    """Return the group a dict from group_to_dict describes."""
    # Before groups were keyed per notifier, every Alertmanager group was "all": migrate on load.
    key = am_group_key(d["notifier"]) if d["key"] == "all" else d["key"]
    return Group(d["notifier"], key, _labels(d["labels"]),
                 {fp: alert_from_dict(a) for fp, a in d["alerts"].items()},
                 d["next_flush"], d["last_sent_at"], frozenset(d["sent_firing"]))


def notification_to_dict(n: Notification) -> dict[str, Any]:
    """Return a JSON-able dict for a notification (the outbox payload)."""
    return {"notifier": n.notifier, "group_key": n.group_key, "status": n.status, "group_labels": n.group_labels,
            "alerts": [alert_to_dict(a) for a in n.alerts], "created_at": n.created_at}


def notification_from_dict(d: Mapping[str, Any]) -> Notification:
    """Return the notification a dict from notification_to_dict describes."""
    return Notification(d["notifier"], d["group_key"], d["status"], _labels(d["group_labels"]),
                        tuple(alert_from_dict(a) for a in d["alerts"]), d["created_at"])


class AlertState:
    """Active alerts and groups in SQLite; callers wrap save() in the transaction that writes the outbox."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        conn.executescript(SCHEMA)

    def load(self) -> tuple[dict[str, Alert], dict[str, Group]]:
        """Return the persisted active alerts and groups (empty on a fresh store)."""
        alerts = {fp: alert_from_dict(json.loads(d))
                  for fp, d in self.conn.execute("SELECT fingerprint, data FROM alert_active")}
        loaded = [group_from_dict(json.loads(d)) for (d,) in self.conn.execute("SELECT data FROM alert_groups")]
        groups = {g.key: g for g in loaded}
        return alerts, groups

    def save(self, alerts: Mapping[str, Alert], groups: Mapping[str, Group]) -> None:
        """Replace the persisted state; not committed here."""
        self.conn.execute("DELETE FROM alert_active")
        self.conn.executemany("INSERT INTO alert_active VALUES (?, ?)",
                              [(fp, json.dumps(alert_to_dict(a))) for fp, a in alerts.items()])
        self.conn.execute("DELETE FROM alert_groups")
        self.conn.executemany("INSERT INTO alert_groups VALUES (?, ?)",
                              [(k, json.dumps(group_to_dict(g))) for k, g in groups.items()])
