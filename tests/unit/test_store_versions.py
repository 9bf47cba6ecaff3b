"""A store written by a newer sloguard (extra columns and tables) still opens, reads and writes (docs/upgrading.md)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sloguard.model import ProbeResult
from sloguard.store import Store


def test_newer_store_with_unknown_columns_and_tables_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "sloguard.db"
    first = ProbeResult(ts=1.0, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=0.1)
    store = Store(path)
    store.add_probe_results([first])
    store.close()
    conn = sqlite3.connect(path)  # what a later release might add
    conn.execute("ALTER TABLE probe_results ADD COLUMN future_stage_s")
    conn.execute("CREATE TABLE future_things (x)")
    conn.commit()
    conn.close()
    store = Store(path)
    second = ProbeResult(ts=2.0, probe="p", target="t", model="m", api="chat", ok=False, error="timeout")
    store.add_probe_results([second])
    assert store.probe_results_since(0.0) == [first, second]
    store.close()
