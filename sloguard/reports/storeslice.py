"""`store:` inputs: probe results from the daemon's SQLite store (read-only) or a running daemon's API.

A slice is comma-separated terms, all of which must hold: `FROM..TO` (RFC 3339 or unix seconds, either
end may be empty), `target=`, `probe=`, `release_id=` (columns of the results), and any other `KEY=VALUE`
matched against the release identity the result was stamped with: `engine`, `engine_version`, `model`
(served models) or a `targets[].labels` key such as `release=v0.11`.
"""

from __future__ import annotations

import json
import math
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from sloguard.model import ProbeResult
from sloguard.reports.data import DataError, Side, build_requests, outcome_of
from sloguard.statedir import DB_NAME
from sloguard.store import PROBE_COLUMNS, open_readonly, probe_result

COLUMNS = {"target": "target", "probe": "probe", "release_id": "release"}
IDENTITY_FIELDS = ("engine", "engine_version", "model")
MAX_ROWS = 1_000_000  # rows one /api/v1/results answer may stream (a report's 1M requests per side)


def parse_time(text: str) -> float:
    """Return unix seconds from RFC 3339 (Z or offset) or a number; ValueError names the text."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ValueError(f"{text!r} is neither an RFC 3339 time (2026-11-24T10:00:00Z) nor unix seconds") from None


def parse(spec: str) -> tuple[dict[str, str], tuple[float, float]]:
    """Return (filters, (from, to)) of a `store:` spec; DataError names a bad term."""
    body = spec.removeprefix("store:")
    filters: dict[str, str] = {}
    start, end = -math.inf, math.inf
    if not body.strip():
        raise DataError(f"{spec}: empty slice; e.g. store:release=v0.11 or store:2026-11-24T10:00Z..2026-11-24T11:00Z")
    for term in (t.strip() for t in body.split(",")):
        try:
            if ".." in term:
                a, _, b = term.partition("..")
                start, end = (parse_time(a) if a else -math.inf), (parse_time(b) if b else math.inf)
            elif "=" in term:
                key, _, value = term.partition("=")
                filters[key.strip()] = value.strip()
            else:
                raise ValueError(f"{term!r} is neither KEY=VALUE nor FROM..TO")
        except ValueError as exc:
            raise DataError(f"{spec}: {exc}") from None
    if start >= end:
        raise DataError(f"{spec}: the time range is empty (FROM must be before TO)")
    return filters, (start, end)


def identities(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Return {release id: identity} of the store (empty for a store written before releases were recorded)."""
    try:
        return {str(r): json.loads(i) for r, i in conn.execute("SELECT release_id, identity FROM releases")}
    except sqlite3.OperationalError:
        return {}


def _matches(ident: dict[str, Any], key: str, value: str) -> bool:
    if key in IDENTITY_FIELDS:
        return str(ident.get(key) or "") == value
    return str((ident.get("labels") or {}).get(key, "")) == value


def _select(conn: sqlite3.Connection, filters: dict[str, str], span: tuple[float, float], what: str
            ) -> tuple[str, list[object], dict[str, dict[str, Any]]]:
    """Return the SQL (selecting `what`) and arguments of a slice, and the store's release identities."""
    known = identities(conn)
    where = ["ts >= ?", "ts < ?"]
    args: list[object] = [span[0] if math.isfinite(span[0]) else -1e18, span[1] if math.isfinite(span[1]) else 1e18]
    ident_terms = {k: v for k, v in filters.items() if k not in COLUMNS}
    for key, value in filters.items():
        if key in COLUMNS:
            where.append(f"{COLUMNS[key]} = ?")
            args.append(value)
    if ident_terms and not known:
        raise DataError("this store holds no release identities (written before sloguard recorded them, or no "
                        "target's identity was read yet): select by time instead, store:FROM..TO")
    if ident_terms:
        ids = [rid for rid, ident in known.items() if all(_matches(ident, k, v) for k, v in ident_terms.items())]
        if not ids:
            have = sorted({f"{k}={v}" for i in known.values() for k, v in (i.get("labels") or {}).items()})
            raise DataError(f"no release in the store has {', '.join(f'{k}={v}' for k, v in ident_terms.items())} "
                            f"(labels recorded: {', '.join(have) or 'none'})")
        where.append(f"release IN ({', '.join('?' * len(ids))})")
        args += ids
    return f"SELECT {what} FROM probe_results WHERE {' AND '.join(where)}", args, known


def query(conn: sqlite3.Connection, filters: dict[str, str], span: tuple[float, float]
          ) -> tuple[list[ProbeResult], dict[str, dict[str, Any]]]:
    """Return the slice's results (oldest first) and the identities of the releases they carry."""
    sql, args, known = _select(conn, filters, span, ", ".join(PROBE_COLUMNS))
    try:
        rows = [probe_result(r) for r in conn.execute(sql + " ORDER BY ts", args)]
    except sqlite3.OperationalError as exc:
        raise DataError(f"cannot read probe results: {exc} (a store written by an older sloguard?)") from None
    used = {r.release for r in rows if r.release}
    return rows, {rid: known[rid] for rid in used if rid in known}


def result_row(r: ProbeResult) -> dict[str, Any]:
    """Return the request row reports compare, from a stored probe result."""
    decode = None if r.e2e_s is None or r.ttft_s is None else r.e2e_s - r.ttft_s
    return {"ttft_s": r.ttft_s, "ttfot_s": r.ttfot_s, "tpot_s": r.tpot_s, "itl_s": r.itl_p50_s, "e2e_s": r.e2e_s,
            "connect_s": r.connect_s, "queue_s": r.queue_s, "prefill_s": r.prefill_s, "decode_s": decode,
            "network_s": r.network_s, "ok": r.ok, "outcome": outcome_of(r.ok, r.error, r.ttft_s),
            "prompt_bucket": r.prompt_bucket, "stage": 0, "ts": r.ts, "elapsed_s": r.elapsed_s}


def side(spec: str, role: str, results: list[ProbeResult], idents: dict[str, dict[str, Any]]) -> Side:
    """Return the Side of a slice's results."""
    if not results:
        raise DataError(f"{spec}: no probe results in this slice")
    ident: dict[str, Any] = {}
    if idents:
        main = Counter(r.release for r in results if r.release in idents).most_common(1)[0][0]
        ident = dict(idents[main])
        if len(idents) > 1:
            ident["labels"] = {**(ident.get("labels") or {}), "releases": str(len(idents))}
    else:
        ident = {"target": ",".join(sorted({r.target for r in results})), "labels": {}}
    rows = [result_row(r) for r in results]
    return Side(role=role, kind="store", spec=spec, requests=build_requests(rows, spec), identity=ident,
                workload={"probes": sorted({r.probe for r in results}),
                          "prompt_buckets": sorted({r.prompt_bucket for r in results})},
                time_range=(results[0].ts, results[-1].ts))


def read_store(spec: str, role: str, state_dir: str | None, daemon: str | None) -> Side:
    """Return a store slice from a daemon's API (`daemon`) or the store file in `state_dir`."""
    filters, span = parse(spec)
    if daemon:
        results, idents = _from_daemon(daemon, spec)
    else:
        if not state_dir:
            raise DataError(f"{spec}: say where the store is: -c CONFIG, --state-dir DIR or --daemon URL")
        path = Path(state_dir) / DB_NAME
        opened = open_readonly(path)
        if opened is None:
            raise DataError(f"{spec}: no store at {path}")
        conn = opened[0]
        try:
            results, idents = query(conn, filters, span)
        finally:
            conn.close()
    return side(spec, role, results, idents)


def _from_daemon(url: str, spec: str) -> tuple[list[ProbeResult], dict[str, dict[str, Any]]]:
    full = f"{url.rstrip('/')}/api/v1/results?{urllib.parse.urlencode({'slice': spec})}"
    try:
        with urllib.request.urlopen(full, timeout=120) as resp:
            lines = iter(resp.read().decode().splitlines())
    except urllib.error.HTTPError as exc:
        raise DataError(f"{spec}: the daemon at {url} answered {exc.code}: {exc.read().decode(errors='replace')[:300]}"
                        ) from None
    except (urllib.error.URLError, OSError) as exc:
        raise DataError(f"{spec}: cannot reach the daemon at {url}: {exc}") from None
    head = json.loads(next(lines, "{}"))
    return [_from_json(json.loads(x)) for x in lines if x], dict(head.get("releases") or {})


def _from_json(d: dict[str, Any]) -> ProbeResult:
    return ProbeResult(**{k: v for k, v in d.items() if k in PROBE_COLUMNS})


def stream(state_dir: str, spec: str, limit: int = MAX_ROWS) -> Iterator[str]:
    """Return a slice as JSON lines (a head with the releases and the count, then one result per line).

    The daemon's API: the slice is checked and counted now (DataError when bad or over `limit` rows); the
    rows are read from the store as the iterator is advanced, so memory stays one row wide whatever the slice.
    """
    filters, span = parse(spec)
    opened = open_readonly(Path(state_dir) / DB_NAME)
    if opened is None:
        raise DataError("the daemon's store cannot be read")
    conn = opened[0]
    try:
        sql, args, known = _select(conn, filters, span, "COUNT(*), GROUP_CONCAT(DISTINCT release)")
        n, releases = conn.execute(sql, args).fetchone()
        if n > limit:
            raise DataError(f"{spec}: the slice holds {n} results, more than the limit of {limit}: narrow it "
                            "(e.g. store:FROM..TO)" + (f" or ask for up to {MAX_ROWS} with ?limit=" if limit < MAX_ROWS
                                                       else ""))
        sql, args, _ = _select(conn, filters, span, ", ".join(PROBE_COLUMNS))
        cursor = conn.execute(sql + " ORDER BY ts", args)
    except sqlite3.Error as exc:
        conn.close()
        raise DataError(f"cannot read probe results: {exc} (a store written by an older sloguard?)") from None
    except DataError:
        conn.close()
        raise
    used = set((releases or "").split(","))
    return _lines(conn, cursor, {"releases": {rid: known[rid] for rid in used if rid in known}, "count": n})


def _lines(conn: sqlite3.Connection, cursor: sqlite3.Cursor, head: dict[str, Any]) -> Iterator[str]:
    try:
        yield json.dumps(head) + "\n"
        for row in cursor:
            r = probe_result(row)
            yield json.dumps({k: getattr(r, k) for k in PROBE_COLUMNS}) + "\n"
    finally:
        conn.close()


def count(state_dir: str, release_id: str, target: str, start: float, end: float) -> int:
    """Return how many stored results of a release and target lie in [start, end) (0 when unreadable)."""
    opened = open_readonly(Path(state_dir) / DB_NAME)
    if opened is None:
        return 0
    conn = opened[0]
    try:
        row = conn.execute("SELECT COUNT(*) FROM probe_results WHERE release = ? AND target = ? AND ts >= ? "
                           "AND ts < ?", (release_id, target, start, end)).fetchone()
        return int(row[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()
