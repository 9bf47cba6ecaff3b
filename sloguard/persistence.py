"""The state store as durability, not a gate: what it cannot take now waits in memory, and nothing stops.

Probe results reach the SLO windows and exported counts before they get here. Here they queue in a
bounded backlog that is written in order whenever the store takes writes (beyond the bound the oldest are
dropped, counted and logged once). Alert state and the outbox fall back to memory (FallbackConnection) and
are copied back. A storage failure never raises out of this module: it is counted by operation, exported
(`sloguard_store_up`, write errors, backlog) and logged once per state change.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from prometheus_client.core import Metric

from sloguard import untrusted
from sloguard.clock import Clock
from sloguard.fallback import FallbackConnection
from sloguard.families import declare
from sloguard.model import ProbeResult
from sloguard.statedir import DB_NAME, StateDir, describe, lock, misconfiguration
from sloguard.store import (
    PROBE_COLUMNS,
    Store,
    is_storage_error,
    iter_results,
    open_readonly,
    probe_result,
    probe_row,
    storable,
)

log = logging.getLogger("sloguard.store")
RETRY_INTERVAL = 5.0  # seconds between attempts to write to a store that failed
FLUSH_CHUNK = 5000  # rows per transaction when writing the backlog
OPERATIONS = ("open", "probe_results", "alert_state", "outbox", "prune")
_TS = PROBE_COLUMNS.index("ts")
STORE_UP = declare("sloguard_store_up", "gauge", "1 while the state store (SQLite in state_dir) takes writes; 0: "
                   "degraded, probe results, alert state and notifications are kept in memory only.")
WRITE_ERRORS = declare("sloguard_store_write_errors", "counter", "Failed writes to the state store by operation "
                       "(since process start).", ("operation",))
BACKLOG = declare("sloguard_store_backlog_results", "gauge", "Probe results waiting in memory for the state store "
                  "(at most probe_settings.store_backlog).")
DROPPED = declare("sloguard_store_backlog_dropped_results", "counter", "Probe results dropped from a full backlog: "
                  "never written to the state store (since process start).")


class Persistence:
    """Probe results, alert state and the outbox: in the store when it takes writes, in memory when not.

    `conn` and `lock` are what Alerting uses (the alert tables' connection, moving to memory on failure).
    """

    def __init__(self, state: StateDir, clock: Clock, backlog: int, retry: float = RETRY_INTERVAL) -> None:
        """Open the store; if it cannot be written, start degraded (reading what it holds where possible).

        Raise StateDirError when the file cannot be used as configured (not a database, permission denied).
        """
        self.path, self.clock, self.capacity = state.path / DB_NAME, clock, backlog
        self._mono, self._retry = clock.monotonic, retry
        self._lock_fd = state.lock_fd
        self.lock = threading.RLock()
        self.store: Store | None = None
        self.backlog: deque[tuple[Any, ...]] = deque()
        self.errors: Counter[str] = Counter()
        self.dropped = 0
        self._ok, self._next_try, self._reason, self._since, self._overflow_logged = False, 0.0, "", 0.0, False
        self._down = False  # a "cannot be written" line was logged and no "writable again" since
        reason = state.degraded  # the write test failed: a store that opens is read from, not written to
        try:
            self.store = Store(self.path, clock, lock=self.lock)
        except (sqlite3.Error, OSError) as exc:
            if (err := misconfiguration(self.path, exc)) is not None:
                state.release()
                raise err from None
            reason = reason or describe(exc)
        self._ok = not reason
        if reason:
            self._start_degraded(reason)
        self.conn = FallbackConnection(self.store.conn, self._failed) if self.store else self._memory_conn()

    def _start_degraded(self, reason: str) -> None:
        self.errors["open"] += 1
        self._down = True
        self._reason, self._since, self._next_try = reason, self.clock.now(), self._mono() + self._retry
        log.error("state store cannot be written: starting degraded, keeping probe results, alert state and "
                  "notifications in memory until it can", extra={"path": str(self.path), "error": reason})

    def _memory_conn(self) -> FallbackConnection:
        seed = open_readonly(self.path)
        empty = not self.path.exists() or self.path.stat().st_size == 0
        exact = empty if seed is None else seed[1]
        return FallbackConnection(None, self._failed, seed=seed[0] if seed else None, exact=exact)

    @property
    def up(self) -> bool:
        """True while the store takes writes and holds everything (no backlog kept for it, alerts on file)."""
        return self._ok and not self.conn.in_memory

    def degraded(self) -> str:
        """Return why the store is degraded, for /-/ready ("" when it is up)."""
        if self.up:
            return ""
        since = datetime.fromtimestamp(self._since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (f"state store {self.path} cannot be written since {since} ({self._reason}); probe results, alert "
                f"state and notifications are kept in memory ({len(self.backlog)} results waiting)")

    def _failed(self, operation: str, exc: BaseException) -> None:
        """Count a failed write; on the first one log the state change once.

        Also the FallbackConnection's hook, called once it has already moved to memory: so the state to
        compare with is `_down`, not `up`.
        """
        self.errors[operation] += 1
        self._ok = False
        self._next_try = self._mono() + self._retry
        if not self._down:
            self._down = True
            self._reason, self._since, self._overflow_logged = describe(exc), self.clock.now(), False
            log.error("state store cannot be written: keeping probe results, alert state and notifications in "
                      "memory until it can", extra={"path": str(self.path), "operation": operation,
                                                    "error": self._reason})

    def add_probe_results(self, results: Sequence[ProbeResult]) -> None:
        """Queue results for the store and write what it takes now; never raises, whatever the store does."""
        self.backlog.extend(map(_storable_row, results))
        self.tick()
        overflow = len(self.backlog) - self.capacity
        if overflow > 0:
            for _ in range(overflow):
                self.backlog.popleft()
            self.dropped += overflow
            if not self._overflow_logged:
                self._overflow_logged = True
                log.error("state store backlog full: dropping the oldest probe results (they still count in "
                          "the SLOs until restart)", extra={"capacity": self.capacity, "dropped": self.dropped})

    def tick(self) -> None:
        """Write the backlog while up; while degraded, try to recover every RETRY_INTERVAL seconds."""
        if self.up:
            try:
                self._write_backlog()
            except Exception as exc:  # any failed write (full, read-only, overflow, closed...) degrades, never stops
                self._failed("probe_results", exc)
        elif self._mono() >= self._next_try:
            self._recover()

    def _write_backlog(self) -> int:
        assert self.store is not None
        written = 0
        while self.backlog:
            chunk = [self.backlog[i] for i in range(min(FLUSH_CHUNK, len(self.backlog)))]
            self.store.add_probe_rows(chunk)
            for _ in chunk:
                self.backlog.popleft()
            written += len(chunk)
        return written

    def _recover(self) -> None:
        """Retry the store; a connection SQLite opened read-only is reopened at once (it stays read-only)."""
        self._next_try = self._mono() + self._retry
        waiting = len(self.backlog)
        for _ in range(2):
            try:
                self._attempt()
                break
            except Exception as exc:
                self._reason = describe(exc)
                if not _needs_new_connection(exc) or self.store is None:
                    return
                with self.lock:  # after a read-only remount or a broken connection: only a new one can write
                    self.conn.detach()
                    self.store.close()
                    self.store = None
        else:
            return
        self._ok, self._down = True, False
        log.warning("state store writable again: backlog written, alert state and outbox back on file",
                    extra={"path": str(self.path), "results_written": waiting,
                           "degraded_for_s": round(self.clock.now() - self._since, 1)})

    def _attempt(self) -> None:
        """Open the store if needed, test a real write, write the backlog, move alert state back to the file."""
        operation = "open"
        try:
            if self._lock_fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._lock_fd = lock(self.path.parent)
            if self.store is None:
                self.store = Store(self.path, self.clock, lock=self.lock)
            operation = "probe_results"
            self.store.check_writable()
            self._write_backlog()
            operation = "alert_state"
            with self.lock:
                self.conn.attach(self.store.conn)
        except Exception:
            self.errors[operation] += 1
            raise

    def history(self, since: float) -> Iterator[ProbeResult]:
        """Yield results with `ts >= since`: the store's (oldest first), then the backlog's not yet written."""
        try:
            if self.store is not None:
                yield from self.store.iter_probe_results(since)
            elif (ro := open_readonly(self.path)) is not None:
                yield from iter_results(ro[0], since)
        except sqlite3.Error as exc:
            if "no such table" not in str(exc):  # a store that never got its first write holds no history
                log.warning("could not read probe history from the state store; SLO windows start without it",
                            extra={"path": str(self.path), "error": str(exc)})
        yield from (probe_result(r) for r in list(self.backlog) if r[_TS] >= since)

    def probe_baselines(self) -> dict[str, tuple[float, float | None]]:
        """Return the store's {probe: (first request ts, end of last success)}; empty without a readable store."""
        try:
            return self.store.probe_baselines() if self.store is not None else {}
        except sqlite3.Error as exc:
            log.warning("could not read probe baselines from the state store; last-success ages start over",
                        extra={"path": str(self.path), "error": str(exc)})
            return {}

    def prune(self, retention: float) -> None:
        """Delete results older than `retention` seconds while the store is up."""
        if self.up and self.store is not None:
            try:
                self.store.prune(retention)
            except Exception as exc:
                self._failed("prune", exc)

    def families(self) -> list[Metric]:
        """Return sloguard_store_up, _write_errors_total{operation}, _backlog_results, _backlog_dropped_total."""
        up = STORE_UP.gauge()
        up.add_metric([], float(self.up))
        errors = WRITE_ERRORS.counter()
        for op in OPERATIONS:
            errors.add_metric([op], self.errors[op])
        backlog = BACKLOG.gauge()
        backlog.add_metric([], len(self.backlog))
        dropped = DROPPED.counter()
        dropped.add_metric([], self.dropped)
        return [up, errors, backlog, dropped]

    def close(self) -> None:
        """Write what the store takes (one last attempt), log what is lost, close; never raises."""
        if self.up:
            self.tick()
        else:
            self._recover()
        if self.backlog:
            log.error("probe results never written to the state store are lost at exit",
                      extra={"path": str(self.path), "results": len(self.backlog)})
        if self.conn.in_memory and (rows := self.conn.memory_rows()):
            log.error("alert state and queued notifications kept in memory are lost at exit (the next start "
                      "resumes from the store's older copy)", extra={"path": str(self.path), "rows": rows})
        self.conn.close()
        if self.store is not None:
            self.store.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def _storable_row(r: ProbeResult) -> tuple[Any, ...]:
    """Return the result's row with every value SQLite can bind; a value it could not is cleared and counted."""
    row = probe_row(r)
    clean = tuple(map(storable, row))
    if clean != row:  # same objects compare equal (NaN included): only a replaced value differs
        untrusted.reject("store", "unstorable_value", next(c for c, a, b in zip(PROBE_COLUMNS, row, clean,
                                                                                strict=True) if a is not b))
    return clean


def _needs_new_connection(exc: BaseException) -> bool:
    """Return whether a failed attempt needs a fresh connection: read-only (SQLite keeps a connection it opened
    read-only so), or not a storage error at all (closed, misused or broken connection)."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    return name.startswith("SQLITE_READONLY") or not is_storage_error(exc)
