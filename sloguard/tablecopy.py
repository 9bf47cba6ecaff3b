"""Copy SQLite tables between connections by column name: the alert tables' moves to memory and back."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable
from typing import Any

# Rows created in memory after an inexact copy get ids this far above the copied sequence, so merging them
# back can never collide with rows only the file holds.
ID_OFFSET = 1_000_000


def table_names(conn: sqlite3.Connection) -> list[str]:
    """Return the user tables of `conn`, by name."""
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                       "AND name NOT LIKE 'sqlite_%' ORDER BY name")]


def _columns(conn: sqlite3.Connection, table: str) -> dict[str, tuple[str, Any]]:
    return {r[1]: (r[2], r[4]) for r in conn.execute(f"PRAGMA table_info({table})")}


def _sequence(conn: sqlite3.Connection) -> dict[str, int]:
    with contextlib.suppress(sqlite3.OperationalError):  # no AUTOINCREMENT table: no sqlite_sequence
        return dict(conn.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
    return {}


def _set_sequence(conn: sqlite3.Connection, seq: dict[str, int]) -> None:
    for name, value in seq.items():
        if conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (value, name)).rowcount == 0:
            conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (name, value))


def offset_ids(conn: sqlite3.Connection, tables: Iterable[str]) -> None:
    """Move the AUTOINCREMENT sequence of `tables` ID_OFFSET ahead, inside conn's transaction."""
    names = set(tables)
    auto = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE "
                                       "'%AUTOINCREMENT%'") if r[0] in names]
    seq = _sequence(conn)
    _set_sequence(conn, {t: seq.get(t, 0) + ID_OFFSET for t in auto})


def copy_rows(src: sqlite3.Connection, dst: sqlite3.Connection, tables: Iterable[str], merge: bool = False) -> None:
    """Copy `tables` from src into dst (same columns by name), inside dst's open transaction.

    Replace (default): dst's rows become src's. Merge: src rows are added, dst rows win on a key conflict.
    """
    names = list(tables)
    for table in names:
        have = _columns(src, table)
        cols = [c for c in _columns(dst, table) if c in have]
        if not cols:
            continue
        listed = ", ".join(cols)
        rows = src.execute(f"SELECT {listed} FROM {table}").fetchall()
        if not merge:
            dst.execute(f"DELETE FROM {table}")
        verb = "INSERT OR IGNORE" if merge else "INSERT"
        dst.executemany(f"{verb} INTO {table} ({listed}) VALUES ({', '.join('?' * len(cols))})", rows)
    seq = {k: v for k, v in _sequence(src).items() if k in names}
    if merge:
        seq = {k: max(v, _sequence(dst).get(k, 0)) for k, v in seq.items()}
    _set_sequence(dst, seq)


def add_missing_columns(src: sqlite3.Connection, dst: sqlite3.Connection, tables: Iterable[str]) -> None:
    """Give dst's tables the columns only src has (an older file attached after a start in memory)."""
    for table in tables:
        have = _columns(dst, table)
        for name, (kind, default) in _columns(src, table).items():
            if name not in have:
                dflt = "" if default is None else f" DEFAULT {default}"
                null = " NOT NULL" if default is not None else ""
                dst.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}{null}{dflt}")
