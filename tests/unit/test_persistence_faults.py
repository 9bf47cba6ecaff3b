"""Every kind of failed store write takes the degraded path (store_up 0, backlog, one log line) and never raises
into evaluation; each fault here is real SQLite behaviour, lifted afterwards, after which the backlog lands in order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from sloguard import untrusted
from sloguard.clock import FakeClock
from sloguard.model import ProbeResult
from sloguard.persistence import RETRY_INTERVAL, Persistence
from sloguard.statedir import prepare
from sloguard.store import Store


def result(ts: float, **kw: Any) -> ProbeResult:
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=0.1, e2e_s=0.5, **kw)


def stored(path: Path, column: str = "ts") -> list[Any]:
    with closing(sqlite3.connect(path)) as conn:
        return [r[0] for r in conn.execute(f"SELECT {column} FROM probe_results ORDER BY rowid")]


def up(p: Persistence) -> float:
    return next(s.value for fam in p.families() for s in fam.samples if s.name == "sloguard_store_up")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


@pytest.fixture
def persist(tmp_path: Path, clock: FakeClock) -> Iterator[Persistence]:
    untrusted.REJECTIONS.clear()
    p = Persistence(prepare(str(tmp_path / "state")), clock, backlog=100)
    p.add_probe_results([result(1)])
    assert p.up
    yield p
    p.close()
    untrusted.REJECTIONS.clear()


def _full(p: Persistence) -> Callable[[], None]:
    assert p.store is not None
    conn = p.store.conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL once the free pages are used, as on a full disk
    with pytest.raises(sqlite3.OperationalError, match="full"):  # use up the free pages, committed one by one
        for _ in range(10_000):
            with conn:
                conn.execute("INSERT INTO probe_results (ts) VALUES (0)")
    def lift() -> None:
        with conn:
            conn.execute("DELETE FROM probe_results WHERE ts = 0")
        conn.execute("PRAGMA max_page_count = 1073741823")

    return lift


def _read_only(p: Persistence) -> Callable[[], None]:
    assert p.store is not None
    p.store.conn.execute("PRAGMA query_only = ON")  # SQLITE_READONLY
    return lambda: None  # the reopened connection writes


def _constraint(p: Persistence) -> Callable[[], None]:
    assert p.store is not None
    p.store.conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON probe_results BEGIN SELECT RAISE(ABORT, 'no'); END")
    return lambda: p.store.conn.execute("DROP TRIGGER refuse") if p.store else None  # SQLITE_CONSTRAINT_TRIGGER


def _closed(p: Persistence) -> Callable[[], None]:
    assert p.store is not None
    p.store.conn.close()  # ProgrammingError: cannot operate on a closed database
    return lambda: None


def _overflow(p: Persistence, monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    real = Store.add_probe_rows
    broken = {"on": True}

    def add(self: Store, rows: Any) -> None:
        if broken["on"]:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        real(self, rows)

    monkeypatch.setattr(Store, "add_probe_rows", add)
    return lambda: broken.update(on=False)


FAULTS = {"disk_full": _full, "read_only": _read_only, "constraint": _constraint, "closed_connection": _closed}


@pytest.mark.parametrize("kind", [*FAULTS, "integer_overflow"])
def test_any_failed_write_degrades_then_recovers(
        kind: str, persist: Persistence, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    lift = _overflow(persist, monkeypatch) if kind == "integer_overflow" else FAULTS[kind](persist)
    for ts in (2, 3, 4):
        persist.add_probe_results([result(ts)])  # never raises
        clock.advance(1)
    assert not persist.up and up(persist) == 0.0 and len(persist.backlog) == 3
    assert persist.errors["probe_results"] >= 1 and persist.degraded()
    down = [r for r in caplog.records if r.getMessage().startswith("state store cannot be written")]
    assert len(down) == 1 and "Traceback" not in caplog.text
    lift()
    clock.advance(RETRY_INTERVAL)
    persist.tick()
    assert persist.up and up(persist) == 1.0 and not persist.backlog
    assert stored(persist.path) == [1, 2, 3, 4]


def test_a_value_sqlite_cannot_bind_is_cleared_counted_and_the_store_stays_up(persist: Persistence) -> None:
    persist.add_probe_results([result(2, output_tokens=2**63, error="\ud800 lone surrogate"), result(3)])
    assert persist.up and not persist.backlog
    assert stored(persist.path) == [1, 2, 3]
    assert stored(persist.path, "output_tokens") == [None, None, None]
    assert stored(persist.path, "error")[1] == "? lone surrogate"
    assert untrusted.REJECTIONS.snapshot() == {("store", "unstorable_value"): 1}
