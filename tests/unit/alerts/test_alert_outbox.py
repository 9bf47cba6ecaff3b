"""The outbox alone: Alertmanager snapshots supersede queued ones, dead letters are pruned, duplicates counted."""

from __future__ import annotations

import asyncio
import random
import socket
import sqlite3
import threading
from pathlib import Path

import pytest

from sloguard.alerts.engine import Alert
from sloguard.alerts.outbox import Outbox
from sloguard.alerts.routing import Notification
from sloguard.alerts.service import Alerting
from sloguard.clock import FakeClock
from sloguard.config.spec import Config
from sloguard.model import Sample
from sloguard.store import Store

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


@pytest.mark.parametrize(("ages_days", "left"), [
    ([0.0, 1.0, 6.9], 3), ([8.0, 30.0], 0), ([0.5, 7.5], 1), ([], 0),
])
def test_prune_deletes_dead_letters_older_than_a_week(ages_days: list[float], left: int) -> None:
    box, now = outbox(), 100 * 86400.0
    with box.conn:
        box.conn.executemany("INSERT INTO outbox_dead VALUES (?, 'n', 'g', '{}', 0, 'expired', 'x', ?)",
                             [(i, now - d * 86400) for i, d in enumerate(ages_days)])
    assert box.prune(now) == len(ages_days) - left
    assert box.conn.execute("SELECT COUNT(*) FROM outbox_dead").fetchone()[0] == left


def test_undelivered_scan_uses_the_timestamp_index() -> None:
    plan = outbox().conn.execute("EXPLAIN QUERY PLAN SELECT notifier, outcome, COUNT(*) FROM outbox_dead "
                                 "WHERE at > ? GROUP BY notifier, outcome", (0.0,)).fetchall()
    assert any("outbox_dead_at" in str(row) for row in plan)


def test_a_store_from_before_maybe_sent_is_migrated() -> None:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, notifier TEXT NOT NULL, "
                 "group_key TEXT NOT NULL, payload TEXT NOT NULL, created_at REAL NOT NULL, "
                 "next_attempt REAL NOT NULL, "
                 "attempts INTEGER NOT NULL DEFAULT 0, inflight INTEGER NOT NULL DEFAULT 0, "
                 "last_error TEXT NOT NULL DEFAULT '')")
    box = Outbox(conn, threading.RLock())
    with box.conn:
        box.put([note("hook", "g", 0.0)], 0.0)
    (item,) = box.take("hook", 0.0)
    box.retry(item, "timeout", 0.0, 600.0, ambiguous=True)
    assert box.take("hook", 1000.0)[0].resumed


def test_alertmanager_outage_leaves_one_queued_item(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on: every delivery is refused at once
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    cfg = Config.model_validate({"version": "sloguard/v1", "builtin_alerts": False,
                                 "alerts": [{"name": "High", "expr": "m > 1"}],
                                 "notifiers": [{"name": "am", "type": "alertmanager", "url": url}]})
    clock = FakeClock(1000.0)
    svc = Alerting(cfg, Store(tmp_path / "s.db", clock), clock, {}, rng=random.Random(0))
    for _ in range(4):  # firing, then three one-minute re-sends
        svc.evaluate([Sample("m", {}, 5.0)], clock.now())
        asyncio.run(svc.deliver_due())
        clock.advance(60)
    assert svc.outbox.pending() == {"am": 1} and svc.outbox.counts[("am", "superseded")] == 3


def test_each_delivery_is_listed_with_when_it_was_queued_tried_and_acknowledged() -> None:
    from sloguard.alerts.outbox import SENT_KEPT

    box = outbox()
    with box.conn:
        box.put([note("hook", "g", 10.0)], 10.0)
    first = box.take("hook", 10.0)[0]
    box.retry(first, "timeout", 11.0, 3600.0)
    again = box.take("hook", 1e9)[0]
    box.ack(again, None, 20.0, 20.5)
    assert box.debug()["sent"] == [{"notifier": "hook", "group_key": "g", "status": "firing", "group_labels": {},
                                    "created_at": 10.0, "fired_at": 0.0, "tried_at": 20.0, "acked_at": 20.5,
                                    "attempts": 2}]
    for i in range(SENT_KEPT + 5):  # bounded: the newest kept
        with box.conn:
            box.put([note("hook", f"g{i}", float(i))], float(i))
        box.ack(box.take("hook", 1e9)[0], None, float(i), float(i))
    sent = box.debug()["sent"]
    assert len(sent) == SENT_KEPT and sent[-1]["group_key"] == f"g{SENT_KEPT + 4}"
