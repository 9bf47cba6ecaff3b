"""The store refuses a database that is not its own (PRAGMA application_id, then its tables) and adds nothing to it;
a store written before the mark existed is adopted; `check` says the same offline."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sloguard.clock import FakeClock
from sloguard.model import ProbeResult
from sloguard.persistence import Persistence
from sloguard.statedir import DB_NAME, StateDirError, prepare, report
from sloguard.store import APPLICATION_ID, OWN_TABLES, ForeignDatabase, Store

ROOT = Path(__file__).resolve().parents[2]


def foreign_db(path: Path, app_id: int = 0) -> str:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE users (name TEXT, password_hash TEXT)")
        conn.execute("INSERT INTO users VALUES ('root', 'x')")
        if app_id:
            conn.execute(f"PRAGMA application_id = {app_id}")
        conn.commit()
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("app_id", [0, 0x0F055112])  # unmarked with foreign tables; another program's mark
def test_a_foreign_database_is_refused_and_left_untouched(tmp_path: Path, app_id: int) -> None:
    path = tmp_path / "app.db"
    before = foreign_db(path, app_id)
    with pytest.raises(ForeignDatabase, match="another program's SQLite database"):
        Store(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not Path(f"{path}-wal").exists()


def test_a_symlinked_foreign_database_stops_the_daemon_with_one_line(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    before = foreign_db(other)
    state = tmp_path / "state"
    state.mkdir()
    (state / DB_NAME).symlink_to(other)
    with pytest.raises(StateDirError, match=r"^state_dir: .*: not a usable sloguard store \(.*tables users"):
        Persistence(prepare(str(state)), FakeClock(1.0), backlog=10)
    assert hashlib.sha256(other.read_bytes()).hexdigest() == before
    usable, line = report(str(state))
    assert not usable and "another program's database: tables users" in line


def test_an_unmarked_store_of_an_older_sloguard_is_adopted(tmp_path: Path) -> None:
    path = tmp_path / DB_NAME
    r = ProbeResult(ts=1.0, probe="p", target="t", model="m", api="chat", ok=True)
    Store(path).close()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA application_id = 0")
        conn.execute("CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY)")
        conn.commit()
    store = Store(path)
    store.add_probe_results([r])
    assert store.probe_results_since(0.0) == [r]
    assert store.conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    store.close()


def test_own_tables_list_every_table_sloguard_creates() -> None:
    created = {m for f in (ROOT / "sloguard").rglob("*.py")
               for m in re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", f.read_text())}
    assert created and created <= OWN_TABLES
