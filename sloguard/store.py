"""SQLite store (WAL) for probe results; other modules add their own tables through `Store.conn`."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from sloguard.clock import Clock, SystemClock
from sloguard.model import LIVE_ONLY_FIELDS, ProbeResult

# Every ProbeResult field but the per-request ITL bucket counts, which only feed the live histograms.
PROBE_COLUMNS = tuple(f.name for f in fields(ProbeResult) if f.name not in LIVE_ONLY_FIELDS)
_DEFAULTS = {f.name: f.default for f in fields(ProbeResult)}
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS probe_results ({", ".join(PROBE_COLUMNS)});
CREATE INDEX IF NOT EXISTS probe_results_ts ON probe_results (ts);
"""


APPLICATION_ID = 0x534C4744  # "SLGD" in the file header (PRAGMA application_id): this file is a sloguard store
# Every table any sloguard release created: a file without the mark holding only these is an older sloguard's.
OWN_TABLES = frozenset({"probe_results", "store_meta", "alert_active", "alert_groups", "outbox", "outbox_dead",
                        "outbox_refs", "releases", "release_boundaries"})


class ForeignDatabase(sqlite3.DatabaseError):
    """The file is an SQLite database of something else: sloguard adds nothing to it."""


def foreign(conn: sqlite3.Connection) -> str | None:
    """Return why the database `conn` holds is not a sloguard store (another program's mark, or tables no
    sloguard creates), or None: a sloguard store, an older sloguard's unmarked one, or an empty file."""
    app = conn.execute("PRAGMA application_id").fetchone()[0]
    if app == APPLICATION_ID:
        return None
    if app != 0:
        return f"application_id 0x{app & 0xFFFFFFFF:08x}"
    tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    others = sorted(t for t in tables - OWN_TABLES if not t.startswith("sqlite_"))
    return f"tables {', '.join(others[:5])}" if others else None


def claim(conn: sqlite3.Connection, path: Path) -> None:
    """Mark a new (or older sloguard's) file as a sloguard store; raise ForeignDatabase for any other database."""
    why = foreign(conn)
    if why is not None:
        raise ForeignDatabase(f"{path} is another program's SQLite database ({why}), not a sloguard store")
    if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


class Store:
    """One SQLite file in WAL mode; writes serialised by a lock, so one Store is safe across threads."""

    def __init__(self, path: str | Path, clock: Clock | None = None, lock: threading.RLock | None = None) -> None:
        """Open (creating) the file; raise sqlite3.Error or OSError, leaving no connection open, if it cannot
        (ForeignDatabase for another program's database: nothing is added to it)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock or SystemClock()
        self.lock = lock or threading.RLock()
        self.conn = sqlite3.connect(self.path, check_same_thread=False)
        try:
            claim(self.conn, self.path)  # before anything is written: a foreign file is left as it was
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA busy_timeout=5000")
            self.conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
            with self.lock:
                self.conn.executescript(_SCHEMA)
                self._add_missing_columns()
        except sqlite3.Error:  # a full or read-only disk: the caller retries later, so leak no descriptor
            self.conn.close()
            raise

    def _add_missing_columns(self) -> None:
        """Migrate a file written by an older version: add the ProbeResult columns it lacks (old rows: defaults)."""
        have = {row[1] for row in self.conn.execute("PRAGMA table_info(probe_results)")}
        with self.conn:
            for column in PROBE_COLUMNS:
                if column not in have:
                    default = _DEFAULTS.get(column)
                    clause = f" DEFAULT {default!r}" if isinstance(default, str | int | float) else ""
                    self.conn.execute(f"ALTER TABLE probe_results ADD COLUMN {column}{clause}")

    def add_probe_results(self, results: Sequence[ProbeResult]) -> None:
        """Insert results in one transaction."""
        self.add_probe_rows([probe_row(r) for r in results])

    def add_probe_rows(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert rows made by `probe_row` in one transaction."""
        marks = ", ".join("?" * len(PROBE_COLUMNS))
        with self.lock, self.conn:
            # Columns named: a migrated file has its added columns last, whatever the field order.
            self.conn.executemany(f"INSERT INTO probe_results ({', '.join(PROBE_COLUMNS)}) VALUES ({marks})", rows)

    def check_writable(self) -> None:
        """Commit one small real write; raise sqlite3.Error when the file cannot take it (full, read-only)."""
        with self.lock, self.conn:
            self.conn.execute("CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value REAL)")
            self.conn.execute("INSERT OR REPLACE INTO store_meta VALUES ('write_check', ?)", (self._clock.now(),))

    def probe_results_since(self, ts: float, probe: str | None = None) -> list[ProbeResult]:
        """Return results with `ts >= ts` (optionally of one probe), oldest first."""
        sql = f"SELECT {', '.join(PROBE_COLUMNS)} FROM probe_results WHERE ts >= ?"
        args: tuple[object, ...] = (ts,)
        if probe is not None:
            sql, args = sql + " AND probe = ?", (ts, probe)
        with self.lock:
            rows = self.conn.execute(sql + " ORDER BY ts", args).fetchall()
        return [_result(row) for row in rows]

    def iter_probe_results(self, since: float, batch: int = 5000) -> Iterator[ProbeResult]:
        """Yield results with `ts >= since`, oldest first, `batch` rows at a time (memory stays O(batch)).

        Reads through its own connection: a WAL snapshot taken at the first row, so writers are neither
        blocked nor seen mid-way, and `lock` is not held between batches. Closed when exhausted or discarded.
        """
        yield from iter_results(sqlite3.connect(self.path), since, batch)

    def probe_baselines(self) -> dict[str, tuple[float, float | None]]:
        """Return {probe: (first request ts, end of its last success or None)} over the stored results.

        What a restart restores so `sloguard_probe_last_success_*` continue instead of starting over.
        """
        sql = ("SELECT probe, MIN(ts), MAX(CASE WHEN ok THEN ts + COALESCE(e2e_s, 0) END) "
               "FROM probe_results GROUP BY probe")
        with self.lock:
            rows = self.conn.execute(sql).fetchall()
        return {str(p): (float(first), None if last is None else float(last)) for p, first, last in rows}

    def prune(self, retention: float) -> int:
        """Delete probe results older than `retention` seconds; return how many were deleted."""
        with self.lock, self.conn:
            cur = self.conn.execute("DELETE FROM probe_results WHERE ts < ?",
                                    (self._clock.now() - retention,))
        return cur.rowcount

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.conn.close()


_OK = PROBE_COLUMNS.index("ok")
if any(f.name in LIVE_ONLY_FIELDS for f in fields(ProbeResult)[: len(PROBE_COLUMNS)]):  # _result is positional
    raise ImportError("ProbeResult's live-only fields must stay the last fields")


def _result(row: Sequence[Any]) -> ProbeResult:
    return ProbeResult(*row[:_OK], bool(row[_OK]), *row[_OK + 1 :])  # type: ignore[call-arg]


def probe_row(r: ProbeResult) -> tuple[Any, ...]:
    """Return the stored row of a result (every column of PROBE_COLUMNS, in order)."""
    return tuple(getattr(r, c) for c in PROBE_COLUMNS)


_INT64 = (-(2**63), 2**63 - 1)


def storable(value: Any) -> Any:
    """Return `value` as SQLite can bind it: an integer beyond 64 bits or a non-scalar becomes None, a string
    with lone surrogates (from a JSON `\\ud800` escape) gets U+FFFD in their place."""
    if value is None or isinstance(value, float | bool):
        return value
    if isinstance(value, int):
        return value if _INT64[0] <= value <= _INT64[1] else None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
        return value
    return None


def probe_result(row: Sequence[Any]) -> ProbeResult:
    """Return the result a row from `probe_row` or the table describes (`itls_s` empty)."""
    return _result(row)


def iter_results(conn: sqlite3.Connection, since: float, batch: int = 5000) -> Iterator[ProbeResult]:
    """Yield the results of `conn` with `ts >= since`, oldest first, `batch` rows at a time; close `conn` at the end."""
    try:
        cur = conn.execute(f"SELECT {', '.join(PROBE_COLUMNS)} FROM probe_results WHERE ts >= ? ORDER BY ts",
                           (since,))
        while rows := cur.fetchmany(batch):
            yield from map(_result, rows)
    finally:
        conn.close()


# SQLite result codes that mean "the file cannot be written or read now" (disk full, read-only filesystem,
# I/O error, locked by someone else), as opposed to a bad statement (SQLITE_ERROR) or a constraint.
STORAGE_ERRORS = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_BUSY",
                  "SQLITE_LOCKED", "SQLITE_PROTOCOL", "SQLITE_NOLFS", "SQLITE_PERM", "SQLITE_CORRUPT",
                  "SQLITE_NOTADB")


def is_storage_error(exc: BaseException) -> bool:
    """Return whether `exc` says the store's file cannot be used now, rather than that a statement is wrong."""
    return isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorname", "").startswith(STORAGE_ERRORS)


def open_readonly(path: Path) -> tuple[sqlite3.Connection, bool] | None:
    """Open an existing store for reading on a full or read-only disk; return (connection, exact) or None.

    `exact` is False when only the main file could be read (`immutable`: what the WAL holds is not seen).
    """
    if not path.is_file() or path.stat().st_size == 0:  # a failed first open leaves an empty file
        return None
    for query, exact in (("mode=ro", True), ("immutable=1", False)):
        conn = None
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True, check_same_thread=False)
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn, exact
        except sqlite3.Error:
            if conn is not None:
                conn.close()
    return None
