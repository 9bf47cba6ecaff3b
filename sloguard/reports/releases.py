"""Release boundaries: which identity each target has now, when it changed, which reports are due.

A target's identity settles once its identity source answered (and, under `engine: auto` with a
`metrics_url`, once a scrape named the engine, or after two identity intervals). From then on every
probe result is stamped with its release id, and any change (labels on reload, engine version, served
models, engine) records a boundary: before id, after id, time. A boundary's report is due once
`reports.after` has passed and both sides hold `min_requests` results, or at `max_wait` with whatever
there is. State lives in the store (tables `releases`, `release_boundaries`, added if missing), so a
restart neither loses a pending report nor takes the restart for a release.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sloguard.config.spec import Config, ReportsSpec
from sloguard.model import ProbeResult
from sloguard.reports.identity import Identity, Observed, merge

log = logging.getLogger("sloguard.reports")
SCHEMA = """
CREATE TABLE IF NOT EXISTS releases (
  release_id TEXT PRIMARY KEY, target TEXT NOT NULL, identity TEXT NOT NULL, first_seen REAL NOT NULL,
  last_seen REAL NOT NULL);
CREATE TABLE IF NOT EXISTS release_boundaries (
  id INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL, at REAL NOT NULL, before_id TEXT NOT NULL,
  after_id TEXT NOT NULL, status TEXT NOT NULL, verdict TEXT NOT NULL DEFAULT '', report_path TEXT NOT NULL DEFAULT '',
  detail TEXT NOT NULL DEFAULT '', updated REAL NOT NULL);
"""
Count = Callable[[str, str, float, float], int]  # (release id, target, from, to) -> stored results


@dataclass(frozen=True)
class Boundary:
    """One identity change of a target and where its report stands."""

    id: int
    target: str
    at: float
    before: str
    after: str
    status: str = "soaking"  # soaking | running | done | skipped | failed
    verdict: str = ""
    report_path: str = ""
    detail: str = ""


@dataclass
class _Target:
    identity: Identity
    settled: bool = False
    observed: bool = False
    engine_known: bool = False
    started: float = 0.0


class Releases:
    """Identity per target, boundaries and their reports; the daemon's event loop is the only caller."""

    def __init__(self, cfg: Config, conn: Any, lock: threading.RLock, now: float) -> None:
        self.conn, self.lock = conn, lock
        with lock:
            conn.executescript(SCHEMA)
            self.previous = {t: Identity(t, i["engine"], i["engine_version"], i["model"], i["labels"])
                             for t, i in self._last_identities()}
            self.boundaries = self._load_boundaries()
        self.targets: dict[str, _Target] = {}
        self.reconfigure(cfg, now)

    def _last_identities(self) -> list[tuple[str, dict[str, Any]]]:
        rows = self.conn.execute("SELECT target, identity FROM releases r WHERE last_seen = "
                                 "(SELECT MAX(last_seen) FROM releases WHERE target = r.target)").fetchall()
        return [(str(t), json.loads(i)) for t, i in rows]

    def _load_boundaries(self) -> list[Boundary]:
        rows = self.conn.execute("SELECT id, target, at, before_id, after_id, status, verdict, report_path, detail "
                                 "FROM release_boundaries ORDER BY id").fetchall()
        return [Boundary(int(r[0]), str(r[1]), float(r[2]), *map(str, r[3:])) for r in rows]

    def reconfigure(self, cfg: Config, now: float) -> None:
        """Apply the config's targets, engines and labels; changed labels of a settled target are a boundary."""
        self.spec: ReportsSpec = cfg.reports
        old, self.targets = self.targets, {}
        for t in cfg.targets:
            engine = "" if t.engine == "auto" else t.engine
            prev = old.get(t.name)
            base = prev.identity if prev else Identity(t.name, engine, None, t.model or "", {})
            ident = replace(base, labels=dict(t.labels), engine=engine or base.engine)
            state = _Target(ident, prev.settled if prev else False, prev.observed if prev else False,
                            bool(engine) or not t.metrics_url or (prev.engine_known if prev else False),
                            prev.started if prev else now)
            self.targets[t.name] = state
            if prev is not None and prev.settled and prev.identity != ident:
                self._boundary(t.name, prev.identity, ident, now)

    def observe(self, seen: Observed, now: float) -> None:
        """Take what an identity collection saw; settle the target or record a boundary on a change."""
        st = self.targets.get(seen.target)
        if st is None:
            return
        st.observed = True
        self._update(st, merge(st.identity, seen), now)

    def observe_engine(self, target: str, engine: str, now: float) -> None:
        """Take the engine a scrape detected (targets under `engine: auto`)."""
        st = self.targets.get(target)
        if st is None or not engine:
            return
        st.engine_known = True
        self._update(st, replace(st.identity, engine=engine), now)

    def _update(self, st: _Target, ident: Identity, now: float) -> None:
        if st.settled:
            if ident != st.identity:
                self._boundary(ident.target, st.identity, ident, now)
            st.identity = ident
            return
        st.identity = ident
        waited = now - st.started >= 2 * self.spec.identity_interval
        if st.observed and (st.engine_known or waited):
            st.settled = True
            prev = self.previous.get(ident.target)
            self._remember(ident, now)
            if prev is not None and prev != ident:  # changed while sloguard was not running (or at its restart)
                self._boundary(ident.target, prev, ident, now)

    def _remember(self, ident: Identity, now: float) -> None:
        with self.lock, self.conn:
            self.conn.execute("INSERT INTO releases VALUES (?, ?, ?, ?, ?) ON CONFLICT(release_id) DO UPDATE SET "
                              "last_seen = excluded.last_seen", (ident.release_id, ident.target,
                                                                 json.dumps(ident.as_json()), now, now))

    def _boundary(self, target: str, before: Identity, after: Identity, now: float) -> None:
        self._remember(after, now)
        with self.lock, self.conn:
            cur = self.conn.execute("INSERT INTO release_boundaries (target, at, before_id, after_id, status, updated) "
                                    "VALUES (?, ?, ?, ?, 'soaking', ?)", (target, now, before.release_id,
                                                                         after.release_id, now))
        b = Boundary(int(cur.lastrowid or 0), target, now, before.release_id, after.release_id)
        if not self.spec.enabled:
            b = self._set(b, status="skipped", detail="reports.enabled is false")
        self.boundaries.append(b)
        log.warning("release boundary", extra={"target": target, "before": before.describe(),
                                                "after": after.describe(), "report_after_s": self.spec.after})

    def stamp(self, results: Sequence[ProbeResult]) -> list[ProbeResult]:
        """Return results stamped with their target's release id (unstamped while it has not settled)."""
        ids = {t: st.identity.release_id for t, st in self.targets.items() if st.settled}
        return [replace(r, release=ids[r.target]) if r.target in ids and not r.release else r for r in results]

    def touch(self, now: float) -> None:
        """Record that every settled identity is still current (restart: the latest is the previous one)."""
        with self.lock, self.conn:
            for st in self.targets.values():
                if st.settled:
                    self.conn.execute("UPDATE releases SET last_seen = ? WHERE release_id = ?",
                                      (now, st.identity.release_id))

    def due(self, now: float, count: Count) -> list[Boundary]:
        """Return the soaking boundaries whose report should be made now (marked running); skip hopeless ones."""
        out = []
        for b in [b for b in self.boundaries if b.status == "soaking"]:
            if now < b.at + self.spec.after:
                continue
            after = count(b.after, b.target, b.at + self.spec.warmup, now)
            before = count(b.before, b.target, b.at - self.spec.baseline, b.at)
            if min(after, before) >= self.spec.min_requests:
                out.append(self._set(b, status="running"))
            elif now >= b.at + self.spec.max_wait:
                if min(after, before) >= 20:
                    out.append(self._set(b, status="running"))
                else:
                    self._set(b, status="skipped", detail=f"not enough probe results after max_wait: baseline "
                              f"{before}, candidate {after} (20 needed)")
        return out

    def _set(self, b: Boundary, status: str, verdict: str | None = None, report_path: str | None = None,
             detail: str | None = None) -> Boundary:
        new = replace(b, status=status, verdict=b.verdict if verdict is None else verdict,
                      report_path=b.report_path if report_path is None else report_path,
                      detail=b.detail if detail is None else detail)
        with self.lock, self.conn:
            self.conn.execute("UPDATE release_boundaries SET status = ?, verdict = ?, report_path = ?, detail = ?, "
                              "updated = strftime('%s','now') WHERE id = ?",
                              (new.status, new.verdict, new.report_path, new.detail, new.id))
        self.boundaries = [new if x.id == b.id else x for x in self.boundaries]
        return new

    def finished(self, b: Boundary, status: str, verdict: str = "", path: str = "", detail: str = "") -> Boundary:
        """Record a report's outcome."""
        return self._set(b, status=status, verdict=verdict, report_path=path, detail=detail)

    def resume(self) -> None:
        """Put reports that were running when the process ended back to soaking (they are made again)."""
        for b in self.boundaries:
            if b.status == "running":
                self._set(b, status="soaking")

    def identity(self, target: str) -> Identity | None:
        """Return a settled target's identity."""
        st = self.targets.get(target)
        return st.identity if st is not None and st.settled else None

    def identity_of(self, release_id: str) -> dict[str, Any] | None:
        """Return a stored identity by release id."""
        with self.lock:
            row = self.conn.execute("SELECT identity FROM releases WHERE release_id = ?", (release_id,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))
