"""Write what a running daemon sees to a gzip JSON-lines recording (the I/O edge of sloguard.recording).

The daemon calls it from its event loop only: each scrape page as fetched, each host read, each drain of the
probe process (results before any server record is joined, so a replay re-runs the join and the stage
derivations), and each evaluation. A gzip sync flush after every evaluation keeps a recording readable up to
its last evaluation even when the process is killed.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sloguard.model import ProbeResult, Sample
from sloguard.recording.codec import VERSION, drain_doc, samples_doc


class Recorder:
    """Append recording events to `path` (gzip); `close` adds the marks and meta given then."""

    def __init__(self, path: str | Path, config_text: str, start: float, meta: Mapping[str, Any] | None = None,
                 level: int = 9) -> None:
        self.path = Path(path)
        self._fh: gzip.GzipFile | None = gzip.GzipFile(self.path, "wb", compresslevel=level)
        self.pages = self.evaluations = 0
        self._write({"kind": "header", "version": VERSION, "t": start, "config": config_text,
                     "meta": dict(meta or {})})

    def _write(self, doc: Mapping[str, Any]) -> None:
        if self._fh is not None:
            self._fh.write(json.dumps(doc, separators=(",", ":"), allow_nan=False).encode() + b"\n")

    def page(self, target: str, t: float, body: bytes) -> None:
        """Record one /metrics body of a target as scraped at `t`."""
        self.pages += 1
        self._write({"kind": "page", "t": t, "target": target, "text": body.decode("utf-8", errors="replace")})

    def scrape_error(self, target: str, t: float, reason: str) -> None:
        """Record a failed scrape (a restarting engine's port refuses: the replay shows the gap)."""
        self._write({"kind": "scrape_error", "t": t, "target": target, "reason": reason})

    def host(self, t: float, samples: Iterable[Sample]) -> None:
        """Record one host-source read (the watched processes' CPU, restarts)."""
        self._write({"kind": "host", "t": t, "samples": samples_doc(samples)})

    def drain(self, t: float, raw: Sequence[ProbeResult], started: Sequence[tuple[str, float]],
              reached: Sequence[ProbeResult], prefilled: Sequence[tuple[str, str, float, int]]) -> None:
        """Record one drain of the probe process (skipped when it brought nothing)."""
        if raw or started or reached or prefilled:
            self._write(drain_doc(t, raw, started, reached, prefilled))

    def evaluate(self, t: float) -> None:
        """Record an evaluation at `t` with the machine's load averages; flush so far."""
        self.evaluations += 1
        self._write({"kind": "evaluate", "t": t, "load": [round(x, 2) for x in os.getloadavg()]})
        if self._fh is not None:
            self._fh.flush()  # GzipFile: a zlib sync flush, readable up to here

    def verdicts(self, t: float, published: Mapping[str, str]) -> None:
        """Record the verdicts the daemon published at `t` (stage/cause per SLO): the replay's check."""
        self._write({"kind": "verdicts", "t": t, "published": dict(published)})

    def mark(self, doc: Mapping[str, Any]) -> None:
        """Record a fault mark ({"t", "fault", "phase": "start"|"end", ...}) or a meta event."""
        self._write({"kind": "mark", **doc} if "kind" not in doc else doc)

    def close(self, marks: Iterable[Mapping[str, Any]] = (), meta: Mapping[str, Any] | None = None) -> None:
        """Write the marks and meta learned during the run, then close (idempotent)."""
        for m in marks:
            self.mark(m)
        if meta:
            self._write({"kind": "meta", **meta})
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """Return every event of a recording; a tail cut short by a killed writer is dropped, not raised."""
    out: list[dict[str, Any]] = []
    with gzip.open(path, "rb") as fh:
        try:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    break
        except (EOFError, zlib.error, OSError):
            pass
    if not out or out[0].get("kind") != "header":
        raise ValueError(f"{Path(path).name}: not a sloguard recording (no header)")
    return out
