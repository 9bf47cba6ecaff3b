"""The outbox alone: Alertmanager snapshots supersede queued ones, dead letters are pruned, duplicates counted."""

from __future__ import annotations

import random
import sqlite3
import threading

import pytest

from sloguard.alerts.engine import Alert
from sloguard.alerts.outbox import Outbox
from sloguard.alerts.routing import Notification

A = Alert("A", (("alertname", "A"),), (), "firing", 0.0, 1.0, fired_at=0.0)


def note(notifier: str, group: str, at: float) -> Notification:
    return Notification(notifier, group, "firing", (), (A,), at)


def outbox() -> Outbox:
    return Outbox(sqlite3.connect(":memory:", check_same_thread=False), threading.RLock(), random.Random(0))


def queued(box: Outbox) -> list[tuple[str, str, float]]:
    return list(box.conn.execute("SELECT notifier, group_key, created_at FROM outbox ORDER BY id"))


# (items put one per minute as (notifier, group), in-flight item index or None) -> what stays queued
@pytest.mark.parametrize(("puts", "inflight", "left", "superseded"), [
    ([("am", "am/all")] * 3, None, [("am", "am/all", 120.0)], 2),
    ([("am", "am/all")] * 3, 0, [("am", "am/all", 0.0), ("am", "am/all", 120.0)], 1),  # in flight: kept
    ([("am", "am/all"), ("am2", "am2/all")], None, [("am", "am/all", 0.0), ("am2", "am2/all", 60.0)], 0),
    ([("hook", "g")] * 2, None, [("hook", "g", 0.0), ("hook", "g", 60.0)], 0),  # not superseding
])
def test_newer_alertmanager_item_supersedes_queued_ones(puts: list[tuple[str, str]], inflight: int | None,
                                                        left: list[tuple[str, str, float]], superseded: int) -> None:
    box = outbox()
    for i, (notifier, group) in enumerate(puts):
        with box.conn:
            box.put([note(notifier, group, i * 60.0)], i * 60.0, supersede={"am", "am2"})
        if inflight == i:
            box.take(notifier, i * 60.0)
    assert queued(box) == left
    assert box.counts[("am", "superseded")] == superseded
