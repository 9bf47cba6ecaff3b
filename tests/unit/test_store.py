"""SQLite store: WAL, round trip of every ProbeResult field but the live-only ITL counts, filtering, retention."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from sloguard.clock import FakeClock
from sloguard.model import ProbeResult
from sloguard.store import Store


def result(ts: float, probe: str = "p", ok: bool = True) -> ProbeResult:
    return ProbeResult(ts=ts, probe=probe, target="t", model="m", api="chat", ok=ok, error=None if ok else "x",
                       status_code=200, connect_s=0.001, ttft_s=0.1, ttfot_s=0.2, e2e_s=0.5, tpot_s=0.01,
                       itl_p50_s=0.01, itl_p99_s=0.02, itl_max_s=0.03, prompt_tokens=70, output_tokens=40,
                       prompt_bucket="short", trace_id="ab" * 16, itl_counts=(1, 2), itl_sum_s=0.03)


def test_round_trip_and_filters(tmp_path: Path) -> None:
    store = Store(tmp_path / "sub" / "s.db", FakeClock())
    store.add_probe_results([result(10), result(20, "q", ok=False), result(30)])
    got = store.probe_results_since(15)
    assert [(r.ts, r.probe, r.ok) for r in got] == [(20, "q", False), (30, "p", True)]
    assert got[1] == dataclasses.replace(result(30), itl_counts=(), itl_sum_s=0.0)
    assert [r.ts for r in store.probe_results_since(0, probe="p")] == [10, 30]
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


def test_old_stores_gain_new_columns_and_stay_readable(tmp_path: Path) -> None:
    """A store written before ProbeResult.elapsed_s existed: its rows read back with elapsed_s None."""
    import sqlite3

    from sloguard.model import LIVE_ONLY_FIELDS

    old_columns = [f.name for f in dataclasses.fields(ProbeResult) if f.name not in {*LIVE_ONLY_FIELDS, "elapsed_s"}]
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute(f"CREATE TABLE probe_results ({', '.join(old_columns)})")
    conn.execute(f"INSERT INTO probe_results VALUES ({', '.join('?' * len(old_columns))})",
                 [getattr(result(10, ok=False), c) for c in old_columns])
    conn.commit()
    conn.close()
    store = Store(tmp_path / "s.db", FakeClock())
    store.add_probe_results([dataclasses.replace(result(20), elapsed_s=1.5)])
    old, new = store.probe_results_since(0)
    assert (old.ok, old.ttft_s, old.elapsed_s) == (False, 0.1, None)
    assert new.elapsed_s == 1.5
    store.close()


def test_prune_uses_the_clock(tmp_path: Path) -> None:
    clock = FakeClock(start=1000.0)
    store = Store(tmp_path / "s.db", clock)
    store.add_probe_results([result(100), result(500), result(900)])
    assert store.prune(retention=450) == 2
    assert [r.ts for r in store.probe_results_since(0)] == [900]
    assert store.prune(retention=450) == 0


def test_survives_reopen_and_threads(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    threads = [threading.Thread(target=store.add_probe_results, args=([result(i)],)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    again = Store(tmp_path / "s.db")
    assert len(again.probe_results_since(0)) == 20
    again.close()


@pytest.mark.parametrize("batch", [1, 2, 3, 7, 5000])
def test_iter_probe_results_streams_in_ts_order_across_batches(tmp_path: Path, batch: int) -> None:
    store = Store(tmp_path / "s.db", FakeClock())
    store.add_probe_results([result(ts) for ts in (50, 10, 40, 20, 30, 60, 5)])
    got = store.iter_probe_results(15, batch=batch)
    assert not isinstance(got, list)
    assert [r.ts for r in got] == [20, 30, 40, 50, 60]
    assert list(store.iter_probe_results(15, batch=batch)) == store.probe_results_since(15)
    store.close()


def test_iter_probe_results_does_not_block_writers(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", FakeClock())
    store.add_probe_results([result(ts) for ts in range(10)])
    it = store.iter_probe_results(0, batch=2)
    assert next(it).ts == 0
    store.add_probe_results([result(100)])  # a write mid-iteration neither deadlocks nor fails
    assert [r.ts for r in it] == list(range(1, 10))  # the reader's snapshot predates the write
    assert store.probe_results_since(100)[0].ts == 100
    store.close()
