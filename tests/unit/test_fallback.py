"""FallbackConnection: alert state and the outbox move to memory on a storage error and back on attach."""

from __future__ import annotations

import random
import sqlite3
import threading
from pathlib import Path

import pytest

from sloguard.alerts.engine import Alert
from sloguard.alerts.outbox import Outbox
from sloguard.alerts.routing import Notification
from sloguard.alerts.state import AlertState
from sloguard.fallback import FallbackConnection, operation
from sloguard.tablecopy import ID_OFFSET

A = Alert("A", (("alertname", "A"),), (), "firing", 0.0, 1.0, fired_at=0.0)


def note(group: str, at: float = 0.0) -> Notification:
    return Notification("hook", group, "firing", (), (A,), at)


def disk(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def read_only(conn: sqlite3.Connection, on: bool) -> None:
    """Make every write fail with SQLITE_READONLY, as on a read-only remount (or let writes through again)."""
    conn.execute(f"PRAGMA query_only = {'ON' if on else 'OFF'}")


def groups(conn: sqlite3.Connection | FallbackConnection) -> list[tuple[int, str]]:
    return [(r[0], r[1]) for r in conn.execute("SELECT id, group_key FROM outbox ORDER BY id")]


class Failures:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, op: str, exc: sqlite3.Error) -> None:
        self.seen.append((op, exc.sqlite_errorname))


def outbox_on(path: Path) -> tuple[sqlite3.Connection, FallbackConnection, Outbox, Failures]:
    raw, failures = disk(path), Failures()
    conn = FallbackConnection(raw, failures)
    AlertState(conn)  # type: ignore[arg-type]
    return raw, conn, Outbox(conn, threading.RLock(), random.Random(0)), failures  # type: ignore[arg-type]


@pytest.mark.parametrize(("sql", "op"), [
    ("INSERT INTO outbox (notifier) VALUES (?)", "outbox"),
    ("UPDATE outbox SET inflight = 1", "outbox"),
    ("DELETE FROM outbox_dead WHERE at < ?", "outbox"),
    ("INSERT OR REPLACE INTO outbox_refs VALUES (?, ?, ?)", "outbox"),
    ("DELETE FROM alert_active", "alert_state"),
    ("INSERT INTO alert_groups VALUES (?, ?)", "alert_state"),
])
def test_operation_names_the_table_group(sql: str, op: str) -> None:
    assert operation(sql) == op


def test_write_on_a_read_only_file_moves_to_memory_with_every_committed_row(tmp_path: Path) -> None:
    raw, conn, box, failures = outbox_on(tmp_path / "s.db")
    with conn:
        box.put([note("g1"), note("g2")], 0.0)
    read_only(raw, True)
    with conn:  # the transaction's first statements run on the file, the failing one moves everything
        box.put([note("g3")], 1.0)
    assert conn.in_memory and failures.seen == [("outbox", "SQLITE_READONLY")]
    assert groups(conn) == [(1, "g1"), (2, "g2"), (3, "g3")]
    assert groups(raw) == [(1, "g1"), (2, "g2")]  # the file keeps its last committed state
    items = box.take("hook", 5.0)  # the oldest item of each group
    assert [i.notification.group_key for i in items] == ["g1", "g2", "g3"]
    box.ack(items[0], {"ts": "1"}, 0.0, 0.0)
    assert box.pending() == {"hook": 2} and box.counts[("hook", "sent")] == 1
    read_only(raw, False)
    conn.attach(raw)
    assert not conn.in_memory and groups(raw) == [(2, "g2"), (3, "g3")]
    assert raw.execute("SELECT ref FROM outbox_refs").fetchall() == [('{"ts": "1"}',)]
    with conn:
        box.put([note("g4")], 9.0)
    assert groups(raw)[-1] == (4, "g4")  # the sequence went back with the rows: no id is reused


def test_a_full_database_mid_transaction_replays_the_whole_transaction_in_memory(tmp_path: Path) -> None:
    raw, conn, box, failures = outbox_on(tmp_path / "s.db")
    with conn:
        box.put([note("g1")], 0.0)
    raw.execute(f"PRAGMA max_page_count = {raw.execute('PRAGMA page_count').fetchone()[0]}")
    big = Notification("hook", "g2", "firing", (("x", "y" * 50_000),), (A,), 1.0)
    state = AlertState(conn)  # type: ignore[arg-type]
    with conn:
        state.save({"fp": A}, {})
        box.put([big], 1.0)
    assert conn.in_memory and failures.seen[0][1] == "SQLITE_FULL"
    assert groups(conn) == [(1, "g1"), (2, "g2")] and list(state.load()[0]) == ["fp"]


def test_statement_errors_are_not_storage_failures(tmp_path: Path) -> None:
    _, conn, _, failures = outbox_on(tmp_path / "s.db")
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        conn.execute("INSERT INTO nope VALUES (1)")
    assert not conn.in_memory and failures.seen == []


def test_start_in_memory_seeded_from_the_file_then_attach_replaces(tmp_path: Path) -> None:
    raw, conn, box, _ = outbox_on(tmp_path / "s.db")
    with conn:
        box.put([note("g1"), note("g2")], 0.0)
    seed = sqlite3.connect(f"file:{tmp_path / 's.db'}?mode=ro", uri=True)
    mem = FallbackConnection(None, seed=seed, exact=True)
    AlertState(mem)  # type: ignore[arg-type]
    box2 = Outbox(mem, threading.RLock())  # type: ignore[arg-type]
    assert mem.in_memory and groups(mem) == [(1, "g1"), (2, "g2")]
    box2.ack(box2.take("hook", 0.0)[0], None, 0.0, 0.0)  # g1 delivered while in memory
    with mem:
        box2.put([note("g3")], 1.0)
    mem.attach(raw)
    assert groups(raw) == [(2, "g2"), (3, "g3")]


def test_inexact_memory_merges_back_without_losing_or_colliding(tmp_path: Path) -> None:
    raw, conn, box, _ = outbox_on(tmp_path / "s.db")
    with conn:
        box.put([note("g1"), note("g2")], 0.0)
    mem = FallbackConnection(None, exact=False)  # the file could not be read at start
    AlertState(mem)  # type: ignore[arg-type]
    box2 = Outbox(mem, threading.RLock())  # type: ignore[arg-type]
    with mem:
        box2.put([note("g3")], 1.0)
    mem.attach(raw)
    assert groups(raw) == [(1, "g1"), (2, "g2"), (ID_OFFSET + 1, "g3")]
    assert mem.memory_rows() == {}


def test_attach_to_a_file_that_still_refuses_keeps_memory(tmp_path: Path) -> None:
    raw, conn, box, _ = outbox_on(tmp_path / "s.db")
    read_only(raw, True)
    with conn:
        box.put([note("g1")], 0.0)
    with pytest.raises(sqlite3.OperationalError):
        conn.attach(raw)
    assert conn.in_memory and groups(conn) == [(1, "g1")] and conn.memory_rows() == {"outbox": 1}


def test_attach_adds_columns_an_older_file_lacks(tmp_path: Path) -> None:
    raw = disk(tmp_path / "old.db")
    raw.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, notifier TEXT NOT NULL, "
                "group_key TEXT NOT NULL, payload TEXT NOT NULL, created_at REAL NOT NULL, next_attempt REAL NOT NULL, "
                "attempts INTEGER NOT NULL DEFAULT 0, inflight INTEGER NOT NULL DEFAULT 0, "
                "last_error TEXT NOT NULL DEFAULT '')")
    mem = FallbackConnection(None)
    box = Outbox(mem, threading.RLock())  # type: ignore[arg-type]
    with mem:
        box.put([note("g1")], 0.0)
    mem.attach(raw)
    assert raw.execute("SELECT group_key, maybe_sent FROM outbox").fetchall() == [("g1", 0)]
