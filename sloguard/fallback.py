"""A SQLite connection that moves to memory when its file cannot be written, and back when it can.

Alert state and the notification outbox live in the store's file; when a write fails (disk full, read-only,
I/O, a closed or broken connection, a value the file refuses), their committed rows are copied into an
in-memory database, the open transaction is replayed there, and the caller never sees the error: alerting and
delivery go on. Only a statement error (SQLITE_ERROR: the SQL itself is wrong, in memory too) is raised.
`attach()` copies the memory state back into a writable file.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from sloguard.tablecopy import add_missing_columns, copy_rows, offset_ids, table_names

log = logging.getLogger("sloguard.store")
FailureHook = Callable[[str, BaseException], None]
_TABLE = re.compile(r"^\s*(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.IGNORECASE)


def operation(sql: str) -> str:
    """Name the store operation a statement belongs to (for `sloguard_store_write_errors_total`)."""
    m = _TABLE.match(sql)
    return "outbox" if m and m.group(1).lower().startswith("outbox") else "alert_state"


def _statement_error(exc: BaseException) -> bool:
    """Return whether SQLite refused the statement itself (a bug: memory would refuse it too)."""
    return getattr(exc, "sqlite_errorname", "") == "SQLITE_ERROR"


def _memory() -> sqlite3.Connection:
    return sqlite3.connect(":memory:", check_same_thread=False)


class FallbackConnection:
    """Used like sqlite3.Connection (execute, executemany, executescript, `with conn:`) by AlertState/Outbox.

    Only the tables created through `executescript` are its own: those are copied on failover and attach.
    Starting in memory (`disk` None), `seed` (a read-only view of the file) fills them as they are created;
    `exact` says whether that view holds every committed row (attach then replaces the file's rows) or may
    miss some (attach merges, and rows created in memory get ids that cannot collide with the file's).
    """

    def __init__(self, disk: sqlite3.Connection | None, on_failure: FailureHook | None = None,
                 seed: sqlite3.Connection | None = None, exact: bool = True) -> None:
        self._conn = disk or _memory()
        self._in_memory = disk is None
        self._on_failure = on_failure or (lambda op, exc: None)
        self._scripts: list[str] = []
        self._journal: list[tuple[str, str, Any]] = []
        self._seed = seed if disk is None else None
        self.exact = exact

    @property
    def in_memory(self) -> bool:
        """True while the rows live in memory only."""
        return self._in_memory

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        """Run one statement; on a storage error move to memory and run it there."""
        return self._run("execute", sql, params)

    def executemany(self, sql: str, params: Iterable[Any]) -> sqlite3.Cursor:
        """Run one statement per parameter set (materialised first, so it can be replayed)."""
        return self._run("executemany", sql, list(params))

    def executescript(self, script: str) -> None:
        """Run a schema script (idempotent: CREATE ... IF NOT EXISTS); remembered for failover and attach."""
        self._scripts.append(script)
        self._journal.clear()  # executescript commits first
        try:
            before = set(table_names(self._conn))
            self._conn.executescript(script)
        except Exception as exc:
            if self._in_memory or _statement_error(exc):
                raise
            self._failover("alert_state", exc)  # runs every remembered script, this one included, in memory
            return
        if self._in_memory:
            self._fill([t for t in table_names(self._conn) if t not in before])

    def _fill(self, new: list[str]) -> None:
        """Fill tables just created in memory from the seed; keep new ids clear of the file's if inexact."""
        if self._seed is not None:
            try:
                present = set(table_names(self._seed))
                with self._conn:
                    copy_rows(self._seed, self._conn, [t for t in new if t in present])
            except sqlite3.Error as exc:
                log.warning("could not read alert state from the state store; starting without it",
                            extra={"error": str(exc)})
                self.exact = False
        if not self.exact:
            with self._conn:
                offset_ids(self._conn, new)

    def _run(self, method: str, sql: str, params: Any) -> sqlite3.Cursor:
        try:
            cur: sqlite3.Cursor = getattr(self._conn, method)(sql, params)
        except Exception as exc:  # any failed write moves to memory (a closed or broken connection too)
            if self._in_memory or _statement_error(exc):
                raise
            self._failover(operation(sql), exc)
            cur = getattr(self._conn, method)(sql, params)
        if self._conn.in_transaction:
            self._journal.append((method, sql, params))
        else:
            self._journal.clear()
        return cur

    def detach(self) -> None:
        """Move to memory before the file's connection is closed (the store reopens it later)."""
        if not self._in_memory:
            self._failover("alert_state", None)

    def _failover(self, op: str, exc: BaseException | None) -> None:
        """Copy the file's committed rows into memory, replay the open transaction there, switch to it."""
        disk = self._conn
        with contextlib.suppress(sqlite3.Error):
            disk.rollback()
        mem = _memory()
        for script in self._scripts:
            mem.executescript(script)
        try:
            with mem:
                copy_rows(disk, mem, table_names(mem))
            self.exact = True
        except sqlite3.Error as read_exc:  # the file cannot even be read: go on without it, merge later
            log.error("state store unreadable; alert state continues in memory without it",
                      extra={"error": str(read_exc)})
            self.exact = False
            with mem:
                offset_ids(mem, table_names(mem))
        for method, sql, params in self._journal:
            getattr(mem, method)(sql, params)
        self._conn, self._in_memory = mem, True
        if exc is not None:
            self._on_failure(op, exc)

    def attach(self, disk: sqlite3.Connection) -> None:
        """Copy the memory rows into `disk` in one transaction and use it from now on; raise if that fails."""
        if not self._in_memory:
            return
        mem = self._conn
        if mem.in_transaction:  # called between transactions only; never split one across two files
            raise sqlite3.OperationalError("attach during a transaction")
        for script in self._scripts:
            disk.executescript(script)
        tables = table_names(mem)
        try:
            with disk:
                add_missing_columns(mem, disk, tables)
                copy_rows(mem, disk, tables, merge=not self.exact)
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                disk.rollback()
            raise
        self._conn, self._in_memory, self.exact, self._seed = disk, False, True, None
        self._journal.clear()
        mem.close()

    def commit(self) -> None:
        """Commit the open transaction (moving to memory if the file refuses it)."""
        try:
            self._conn.commit()
        except Exception as exc:
            if self._in_memory or _statement_error(exc):
                raise
            self._failover(operation(self._journal[0][1]) if self._journal else "alert_state", exc)
            self._conn.commit()
        self._journal.clear()

    def rollback(self) -> None:
        """Roll back the open transaction."""
        self._journal.clear()
        self._conn.rollback()

    def __enter__(self) -> FallbackConnection:
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if typ is None:
            self.commit()
        else:
            self.rollback()

    def memory_rows(self) -> dict[str, int]:
        """Return the non-empty tables held only in memory and their row counts (empty when on file)."""
        if not self._in_memory:
            return {}
        counts = {t: self._conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                  for t in table_names(self._conn)}
        return {t: n for t, n in counts.items() if n}

    def close(self) -> None:
        """Close the in-memory database, if any (the file's connection belongs to the Store)."""
        if self._in_memory:
            self._conn.close()
