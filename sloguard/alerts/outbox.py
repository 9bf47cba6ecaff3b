"""Durable notification outbox: written before sending, deleted only on acknowledgement, never dropped silently."""

from __future__ import annotations

import json
import logging
import random
import sqlite3
import threading
from collections import Counter, deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sloguard.alerts.routing import Notification
from sloguard.alerts.state import notification_from_dict, notification_to_dict

log = logging.getLogger("sloguard.alerts.outbox")

SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT, notifier TEXT NOT NULL, group_key TEXT NOT NULL,
  payload TEXT NOT NULL, created_at REAL NOT NULL, next_attempt REAL NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0, inflight INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '',
  maybe_sent INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS outbox_dead (
  id INTEGER PRIMARY KEY, notifier TEXT NOT NULL, group_key TEXT NOT NULL, payload TEXT NOT NULL,
  created_at REAL NOT NULL, outcome TEXT NOT NULL, error TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS outbox_dead_at ON outbox_dead (at);
CREATE TABLE IF NOT EXISTS outbox_refs (
  notifier TEXT NOT NULL, group_key TEXT NOT NULL, ref TEXT NOT NULL, PRIMARY KEY (notifier, group_key));
"""
UNDELIVERED_WINDOW = 3600.0  # failed/expired notifications keep their alert firing this long
DEAD_KEEP = 7 * 86400.0  # dead letters stay visible in /debug/alerts this long, then prune() deletes them


@dataclass(frozen=True, slots=True)
class Backoff:
    """Full-jitter exponential backoff: uniform(0, min(cap, base × 2^attempt)) seconds, at least `floor`."""

    base: float = 1.0
    cap: float = 300.0
    floor: float = 0.2

    def delay(self, attempt: int, rng: random.Random) -> float:
        return max(self.floor, rng.uniform(0.0, min(self.cap, self.base * 2.0 ** min(attempt, 30))))


@dataclass(frozen=True, slots=True)
class Item:
    """One stored delivery; `resumed` is True when a previous attempt may have reached the receiver
    (it was in flight when the process died, or failed ambiguously: timeout, disconnect, 5xx)."""

    id: int
    notification: Notification
    created_at: float
    attempts: int
    resumed: bool
    ref: dict[str, str] | None


SENT_KEPT = 200  # deliveries /debug/alerts lists: a day of a busy receiver's pages, resolves and updates


class Outbox:
    """The outbox tables; every method but put() commits under `lock`."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock, rng: random.Random | None = None,
                 backoff: Backoff | None = None) -> None:
        self.conn, self.lock = conn, lock
        self.rng = rng or random.Random()
        self.backoff = backoff or Backoff()
        self.counts: Counter[tuple[str, str]] = Counter()
        # The last SENT_KEPT deliveries, for /debug/alerts: when each was queued, tried, acknowledged (memory only)
        self.sent: deque[dict[str, Any]] = deque(maxlen=SENT_KEPT)
        with lock:
            conn.executescript(SCHEMA)
            columns = {r[1] for r in conn.execute("PRAGMA table_info(outbox)")}
            if "maybe_sent" not in columns:  # a store written before ambiguous failures were remembered
                with conn:
                    conn.execute("ALTER TABLE outbox ADD COLUMN maybe_sent INTEGER NOT NULL DEFAULT 0")

    def put(self, notes: Sequence[Notification], now: float, supersede: Collection[str] = ()) -> None:
        """Insert notifications inside the caller's transaction (committed with the alert state).

        For notifiers named in `supersede` (Alertmanager: each notification is the group's whole current
        state), a new notification deletes the group's older queued items that are not in flight, counted
        as outcome "superseded", so an outage leaves one item per group rather than a backlog of stale ones.
        """
        for n in notes:
            if n.notifier in supersede:
                gone = self.conn.execute("DELETE FROM outbox WHERE notifier = ? AND group_key = ? AND inflight = 0",
                                         (n.notifier, n.group_key)).rowcount
                self.counts[(n.notifier, "superseded")] += gone
        self.conn.executemany(
            "INSERT INTO outbox (notifier, group_key, payload, created_at, next_attempt) VALUES (?, ?, ?, ?, ?)",
            [(n.notifier, n.group_key, json.dumps(notification_to_dict(n)), now, now) for n in notes])

    def take(self, notifier: str, now: float) -> list[Item]:
        """Mark and return the oldest due item of each group (groups deliver in order); commit the mark."""
        with self.lock, self.conn:
            rows = self.conn.execute(
                "SELECT o.id, o.payload, o.created_at, o.attempts, o.inflight OR o.maybe_sent, r.ref FROM outbox o "
                "LEFT JOIN outbox_refs r ON r.notifier = o.notifier AND r.group_key = o.group_key "
                "WHERE o.notifier = ? AND o.id IN (SELECT MIN(id) FROM outbox WHERE notifier = ? GROUP BY group_key) "
                "AND o.next_attempt <= ? ORDER BY o.id", (notifier, notifier, now)).fetchall()
            self.conn.executemany("UPDATE outbox SET inflight = 1, attempts = attempts + 1 WHERE id = ?",
                                  [(r[0],) for r in rows])
        return [Item(r[0], notification_from_dict(json.loads(r[1])), r[2], r[3] + 1, bool(r[4]),
                     json.loads(r[5]) if r[5] else None) for r in rows]

    def ack(self, item: Item, ref: dict[str, str] | None, tried_at: float, now: float) -> None:
        """Delete a delivered item and remember the receiver's message reference for its group.

        `tried_at`: when the acknowledged attempt started; kept with `now` in `sent` (the last 200 deliveries).
        """
        n = item.notification
        self.sent.append({"notifier": n.notifier, "group_key": n.group_key, "status": n.status,
                          "group_labels": dict(n.group_labels), "created_at": item.created_at,
                          "fired_at": min((a.fired_at for a in n.alerts if a.fired_at is not None), default=None),
                          "tried_at": tried_at, "acked_at": now, "attempts": item.attempts})
        with self.lock, self.conn:
            self.conn.execute("DELETE FROM outbox WHERE id = ?", (item.id,))
            if ref is not None:
                self.conn.execute("INSERT OR REPLACE INTO outbox_refs VALUES (?, ?, ?)",
                                  (n.notifier, n.group_key, json.dumps(ref)))
        self.counts[(n.notifier, "sent")] += 1
        if item.resumed:  # an earlier attempt may have reached the receiver too
            self.counts[(n.notifier, "duplicate_possible")] += 1

    def retry(self, item: Item, error: str, now: float, max_age: float, retry_after: float | None = None,
              ambiguous: bool = False) -> None:
        """Schedule the next attempt after backoff (at least Retry-After); expire it past `max_age`.

        `ambiguous`: this attempt may have reached the receiver; remembered so the eventual ack counts
        a possible duplicate.
        """
        if now - item.created_at >= max_age:
            self._bury(item, "expired", error, now)
            return
        delay = max(self.backoff.delay(item.attempts, self.rng), retry_after or 0.0)
        with self.lock, self.conn:
            self.conn.execute("UPDATE outbox SET inflight = 0, next_attempt = ?, last_error = ?, "
                              "maybe_sent = maybe_sent OR ? WHERE id = ?", (now + delay, error, ambiguous, item.id))
        self.counts[(item.notification.notifier, "retried")] += 1
        log.warning("notification delivery failed, will retry", extra={
            "notifier": item.notification.notifier, "attempt": item.attempts, "retry_in_s": round(delay, 3),
            "error": error})

    def fail(self, item: Item, error: str, now: float) -> None:
        """Move a permanently rejected item to the dead-letter table, logged and counted."""
        self._bury(item, "failed", error, now)

    def expire_old(self, notifier: str, now: float, max_age: float) -> None:
        """Expire waiting items older than `max_age` even if no attempt is due."""
        with self.lock:
            rows = self.conn.execute("SELECT id, payload, created_at, attempts FROM outbox WHERE notifier = ? "
                                     "AND created_at <= ? AND inflight = 0", (notifier, now - max_age)).fetchall()
        for r in rows:
            self._bury(Item(r[0], notification_from_dict(json.loads(r[1])), r[2], r[3], False, None),
                       "expired", "max_delivery_age reached", now)

    def stand_by(self, notifier: str, now: float, handover: float) -> None:
        """Drop waiting items older than `handover`, counted as outcome "standby" (HA: another replica sends)."""
        with self.lock, self.conn:
            gone = self.conn.execute("DELETE FROM outbox WHERE notifier = ? AND created_at <= ? AND inflight = 0",
                                     (notifier, now - handover)).rowcount
        self.counts[(notifier, "standby")] += gone

    def _bury(self, item: Item, outcome: str, error: str, now: float) -> None:
        n = item.notification
        with self.lock, self.conn:
            self.conn.execute("INSERT OR REPLACE INTO outbox_dead SELECT id, notifier, group_key, payload, created_at, "
                              "?, ?, ? FROM outbox WHERE id = ?", (outcome, error, now, item.id))
            self.conn.execute("DELETE FROM outbox WHERE id = ?", (item.id,))
        self.counts[(n.notifier, outcome)] += 1
        log.error("notification undeliverable", extra={
            "notifier": n.notifier, "outcome": outcome, "group": n.group_key, "attempts": item.attempts,
            "error": error})

    def prune(self, now: float, keep: float = DEAD_KEEP) -> int:
        """Delete dead letters buried more than `keep` seconds ago; return how many."""
        with self.lock, self.conn:
            return self.conn.execute("DELETE FROM outbox_dead WHERE at < ?", (now - keep,)).rowcount

    def pending(self) -> dict[str, int]:
        """Return the number of waiting items per notifier."""
        with self.lock:
            return dict(self.conn.execute("SELECT notifier, COUNT(*) FROM outbox GROUP BY notifier").fetchall())

    def undelivered(self, now: float) -> dict[tuple[str, str], int]:
        """Return failed/expired counts per (notifier, outcome) over the last UNDELIVERED_WINDOW seconds."""
        with self.lock:
            rows = self.conn.execute("SELECT notifier, outcome, COUNT(*) FROM outbox_dead WHERE at > ? "
                                     "GROUP BY notifier, outcome", (now - UNDELIVERED_WINDOW,)).fetchall()
        return {(r[0], r[1]): r[2] for r in rows}

    def debug(self) -> dict[str, Any]:
        """Return waiting and dead-letter items without payload secrets (payloads hold only alert data)."""
        with self.lock:
            waiting = self.conn.execute("SELECT id, notifier, group_key, created_at, next_attempt, attempts, "
                                        "last_error FROM outbox ORDER BY id LIMIT 100").fetchall()
            dead = self.conn.execute("SELECT id, notifier, group_key, created_at, outcome, error, at "
                                     "FROM outbox_dead ORDER BY at DESC LIMIT 50").fetchall()
        keys_w = ("id", "notifier", "group_key", "created_at", "next_attempt", "attempts", "last_error")
        keys_d = ("id", "notifier", "group_key", "created_at", "outcome", "error", "at")
        return {"waiting": [dict(zip(keys_w, r, strict=True)) for r in waiting],
                "dead": [dict(zip(keys_d, r, strict=True)) for r in dead], "sent": list(self.sent)}
