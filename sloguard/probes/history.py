"""Recent probe results for GET /debug/probes; failures are kept apart so successes cannot push them out.

Bounded: at most `size` successes and `size` failures are held, each a flat result (no per-token list), and
one page is at most MAX_PAGE rows, so a page is built in bounded time (~10 us per row) on any stream.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from sloguard.model import LIVE_ONLY_FIELDS, ProbeResult
from sloguard.outcome import outcome

ROW_FIELDS = tuple(f.name for f in fields(ProbeResult) if f.name not in LIVE_ONLY_FIELDS)
DEFAULT_PAGE, MAX_PAGE = 100, 500


class ProbeHistory:
    """Hold the last `size` successes and, separately, the last `size` failures (thread-safe).

    A failure is evicted only by `size` newer failures, so it outlives any number of later successes.
    """

    def __init__(self, size: int = 200) -> None:
        self._ok: deque[ProbeResult] = deque(maxlen=size)
        self._failed: deque[ProbeResult] = deque(maxlen=size)
        self._lock = threading.Lock()

    def add(self, r: ProbeResult) -> None:
        """Record one result."""
        with self._lock:
            (self._ok if r.ok else self._failed).append(r)

    def snapshot(self) -> list[dict[str, Any]]:
        """Return the newest DEFAULT_PAGE results, newest first, as JSON-ready dicts (no secrets)."""
        return self.page({})

    def page(self, query: Mapping[str, str]) -> list[dict[str, Any]]:
        """Return one page newest first: `limit` (<= MAX_PAGE), `offset`, and filters `probe`, `outcome`, `ok`.

        Raises ValueError naming the parameter when a number is malformed.
        """
        limit = min(_int(query, "limit", DEFAULT_PAGE), MAX_PAGE)
        offset = _int(query, "offset", 0)
        with self._lock:
            rows = [*self._ok, *self._failed]
        rows.sort(key=lambda r: r.ts, reverse=True)
        probe, kind, ok = query.get("probe"), query.get("outcome"), query.get("ok")
        if probe:
            rows = [r for r in rows if r.probe == probe]
        if kind:
            rows = [r for r in rows if outcome(r) == kind]
        if ok in ("true", "false"):
            rows = [r for r in rows if r.ok == (ok == "true")]
        return [to_row(r) for r in rows[offset : offset + limit]]


def _int(query: Mapping[str, str], key: str, default: int) -> int:
    raw = query.get(key)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()):
        raise ValueError(f"{key}: expected a non-negative integer, got {raw[:20]!r}")
    return int(raw)


def to_row(r: ProbeResult) -> dict[str, Any]:
    """Return a result as a flat dict of its stored fields plus its outcome (`sloguard probe --json`)."""
    row = {name: getattr(r, name) for name in ROW_FIELDS}
    row["outcome"] = outcome(r)
    return row
