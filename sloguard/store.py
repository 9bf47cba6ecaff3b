"""SQLite store (WAL) for probe results; other modules add their own tables through `Store.conn`."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from sloguard.clock import Clock, SystemClock
from sloguard.model import ProbeResult

# Every ProbeResult field but the per-token ITL list, which only feeds the live histograms.
PROBE_COLUMNS = tuple(f.name for f in fields(ProbeResult) if f.name != "itls_s")
_DEFAULTS = {f.name: f.default for f in fields(ProbeResult)}
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS probe_results ({", ".join(PROBE_COLUMNS)});
CREATE INDEX IF NOT EXISTS probe_results_ts ON probe_results (ts);
"""


class Store:
    """One SQLite file in WAL mode; writes serialised by a lock, so one Store is safe across threads."""

    def __init__(self, path: str | Path, clock: Clock | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock or SystemClock()
        self.lock = threading.RLock()
        self.conn = sqlite3.connect(self.path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA busy_timeout=5000")
        self.conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
        with self.lock:
            self.conn.executescript(_SCHEMA)
            self._add_missing_columns()

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
        rows = [tuple(getattr(r, c) for c in PROBE_COLUMNS) for r in results]
        marks = ", ".join("?" * len(PROBE_COLUMNS))
        with self.lock, self.conn:
            # Columns named: a migrated file has its added columns last, whatever the field order.
            self.conn.executemany(f"INSERT INTO probe_results ({', '.join(PROBE_COLUMNS)}) VALUES ({marks})", rows)

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
        conn = sqlite3.connect(self.path)
        try:
            cur = conn.execute(f"SELECT {', '.join(PROBE_COLUMNS)} FROM probe_results WHERE ts >= ? ORDER BY ts",
                               (since,))
            while rows := cur.fetchmany(batch):
                yield from map(_result, rows)
        finally:
            conn.close()

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


def _result(row: Sequence[Any]) -> ProbeResult:
    """Build a ProbeResult from a row of PROBE_COLUMNS by name (fields may be added anywhere in the class)."""
    values = dict(zip(PROBE_COLUMNS, row, strict=True))
    values["ok"] = bool(values["ok"])
    return ProbeResult(**values)
