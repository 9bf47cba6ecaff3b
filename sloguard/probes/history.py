"""Recent probe results for GET /debug/probes; failures are kept apart so successes cannot push them out."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import asdict
from typing import Any

from sloguard.model import ProbeResult


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
        """Return results newest first as JSON-ready dicts (no per-token ITL list, no secrets)."""
        with self._lock:
            rows = [*self._ok, *self._failed]
        rows.sort(key=lambda r: r.ts, reverse=True)
        return [to_row(r) for r in rows]


def to_row(r: ProbeResult) -> dict[str, Any]:
    """Return a result as a flat dict without `itls_s` (the fields of `sloguard probe --json`)."""
    row = asdict(r)
    del row["itls_s"]
    return row
