"""Persistence: the store as durability, not a gate. A store that refuses writes loses nothing while the
process lives, logs once per state change, exports its state, and takes everything back in order."""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sloguard.alerts.notifiers import NOTIFIERS
from sloguard.alerts.routing import Notification
from sloguard.alerts.service import Alerting
from sloguard.clock import FakeClock
from sloguard.config.spec import Config
from sloguard.model import ProbeResult
from sloguard.persistence import DB_NAME, Persistence
from sloguard.snapshot import Snapshot
from sloguard.statedir import StateDir, StateDirError, prepare
from sloguard.store import Store


def result(ts: float, ok: bool = False) -> ProbeResult:
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=ok, error=None if ok else "http 500")


class RemountableStore(Store):
    """A Store on a filesystem the test remounts: while `read_only`, every connection refuses writes with
    SQLITE_READONLY, including one opened later (as after a real read-only remount)."""

    read_only = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if RemountableStore.read_only:
            self.conn.execute("PRAGMA query_only = ON")


@pytest.fixture(autouse=True)
def remountable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sloguard.persistence.Store", RemountableStore)
    RemountableStore.read_only = False


def read_only(p: Persistence, on: bool) -> None:
    """Remount read-only (every write fails with SQLITE_READONLY) or read-write (a reopened store writes)."""
    RemountableStore.read_only = on
    if on and p.store is not None:
        p.store.conn.execute("PRAGMA query_only = ON")


def stored(path: Path) -> list[float]:
    with closing(sqlite3.connect(path)) as conn:
        return [r[0] for r in conn.execute("SELECT ts FROM probe_results ORDER BY rowid")]


def state_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "sloguard.store"]


def values(p: Persistence) -> dict[str, float]:
    return {f"{s.name}{s.labels.get('operation', '')}": s.value for fam in p.families() for s in fam.samples}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


@pytest.fixture
def persist(tmp_path: Path, clock: FakeClock) -> Iterator[Persistence]:
    p = Persistence(prepare(str(tmp_path / "state")), clock, backlog=100)
    yield p
    p.close()


def test_results_wait_in_memory_and_land_in_order_when_writes_work_again(
        persist: Persistence, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    persist.add_probe_results([result(1), result(2)])
    assert persist.up and stored(persist.path) == [1, 2] and not persist.backlog
    read_only(persist, True)
    for ts in (3, 4, 5):
        persist.add_probe_results([result(ts)])
        clock.advance(1)
    assert not persist.up and len(persist.backlog) == 3
    assert values(persist)["sloguard_store_write_errors_totalprobe_results"] == 1  # no retry inside 5 s
    clock.advance(3)
    persist.add_probe_results([result(6)])  # the retry is due: it fails, reopens, fails again; not logged again
    assert values(persist)["sloguard_store_write_errors_totalprobe_results"] == 3
    assert [m for m in state_logs(caplog)] == [
        "state store cannot be written: keeping probe results, alert state and notifications in memory until it can"]
    assert [r.ts for r in persist.history(2.5)] == [3, 4, 5, 6]  # a reload refills from the file + the backlog
    read_only(persist, False)
    clock.advance(5)
    persist.tick()
    assert persist.up and stored(persist.path) == [1, 2, 3, 4, 5, 6] and not persist.backlog
    assert state_logs(caplog)[-1].startswith("state store writable again")
    assert values(persist)["sloguard_store_up"] == 1 and persist.degraded() == ""


def test_a_full_backlog_drops_the_oldest_counted_and_logged_once(
        tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    persist = Persistence(prepare(str(tmp_path / "state")), clock, backlog=3)
    read_only(persist, True)
    persist.add_probe_results([result(ts) for ts in (1, 2, 3, 4, 5)])
    persist.add_probe_results([result(6), result(7)])
    assert [r[0] for r in persist.backlog] == [5, 6, 7] and persist.dropped == 4
    assert values(persist)["sloguard_store_backlog_dropped_results_total"] == 4
    assert values(persist)["sloguard_store_backlog_results"] == 3
    assert sum("backlog full" in m for m in state_logs(caplog)) == 1
    assert "3 results waiting" in persist.degraded()
    read_only(persist, False)
    clock.advance(5)
    persist.tick()
    assert stored(persist.path) == [5, 6, 7]
    persist.close()


def test_exit_while_degraded_says_what_is_lost(
        tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    persist = Persistence(prepare(str(tmp_path / "state")), clock, backlog=10)
    read_only(persist, True)
    persist.add_probe_results([result(1), result(2)])
    persist.close()
    lost = [r for r in caplog.records if "lost at exit" in r.getMessage()]
    assert len(lost) == 1 and lost[0].results == 2  # type: ignore[attr-defined]


class Recorder:
    """A notifier that records what it delivered."""

    sent: ClassVar[list[Notification]] = []

    def __init__(self, spec: Any, secret: str | None, clock: Any) -> None:
        pass

    async def send(self, note: Notification, ref: Mapping[str, str] | None) -> dict[str, str] | None:
        Recorder.sent.append(note)
        return None

    async def close(self) -> None:
        pass


def alerting(persist: Persistence, clock: FakeClock) -> Alerting:
    cfg = Config.model_validate({
        "version": "sloguard/v1", "notifiers": [{"name": "hook", "type": "webhook", "url": "http://127.0.0.1:9/x",
                                                 "group_wait": "0s", "match": {"alertname": ["SloguardStoreDown"]}}]})
    return Alerting(cfg, persist, clock, {}, rng=random.Random(0))


def test_alerts_fire_and_are_delivered_while_the_store_refuses_writes(
        persist: Persistence, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(NOTIFIERS, "webhook", Recorder)
    Recorder.sent = []
    svc, snap = alerting(persist, clock), Snapshot()
    read_only(persist, True)
    for _ in range(8):  # SloguardStoreDown: for 1m
        persist.tick()
        snap.put("store", persist.families())
        svc.evaluate(snap.samples(), clock.now())
        asyncio.run(svc.deliver_due())
        clock.advance(10)
    assert [n.alerts[0].name for n in Recorder.sent] == ["SloguardStoreDown"]
    assert persist.conn.in_memory and values(persist)["sloguard_store_write_errors_totalalert_state"] == 1
    # The alert tables failed first (no probe result was waiting): still one line, with the time it began.
    assert state_logs(caplog)[0].startswith("state store cannot be written")
    assert f"since {time.strftime('%Y-%m-%dT%H:%M', time.gmtime(1_800_000_000))}" in persist.degraded()
    read_only(persist, False)
    clock.advance(5)
    persist.tick()
    assert persist.up and not persist.conn.in_memory
    assert [m.split(":")[0] for m in state_logs(caplog)] == ["state store cannot be written",
                                                             "state store writable again"]
    restarted = alerting(persist, clock)  # the firing alert reached the file: a restart does not re-page
    assert [a.state for a in restarted.active.values()] == ["firing"]


def test_start_degraded_reads_history_and_alert_state_then_attaches(
        tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    first = Persistence(prepare(str(state)), clock, backlog=100)
    first.add_probe_results([result(1), result(2)])
    first.close()
    real, refusals = Store, [0]

    def full_disk(*args: Any, **kwargs: Any) -> Store:
        if refusals[0] < 2:  # the first open and the first retry find the disk full
            refusals[0] += 1
            exc = sqlite3.OperationalError("database or disk is full")
            exc.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
            raise exc
        return real(*args, **kwargs)

    monkeypatch.setattr("sloguard.persistence.Store", full_disk)
    degraded = prepare(str(state))
    persist = Persistence(StateDir(degraded.path, "No space left on device", degraded.lock_fd), clock, backlog=100)
    assert not persist.up and persist.store is None and "No space left on device" in persist.degraded()
    assert [r.ts for r in persist.history(0)] == [1, 2]
    persist.add_probe_results([result(3)])
    clock.advance(5)
    persist.tick()
    assert not persist.up and refusals[0] == 2
    clock.advance(5)
    persist.tick()
    assert persist.up and stored(state / DB_NAME) == [1, 2, 3]
    persist.close()


def test_a_file_that_is_not_a_database_is_misconfiguration(tmp_path: Path, clock: FakeClock) -> None:
    (tmp_path / DB_NAME).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StateDirError, match=r"^state_dir: .*sloguard.db: not a usable sloguard store"):
        Persistence(prepare(str(tmp_path)), clock, backlog=10)
    prepare(str(tmp_path)).release()  # the lock was released with the error


def test_logs_carry_no_traceback(persist: Persistence, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    read_only(persist, True)
    for _ in range(20):
        persist.add_probe_results([result(clock.now())])
        clock.advance(1)
    assert all(r.exc_info is None for r in caplog.records)
