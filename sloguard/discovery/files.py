"""file_sd: Prometheus target-group files (JSON or YAML), watched: a change is picked up within `POLL` seconds.

Files are polled by (path, inode, mtime, size) once a second instead of inotify: a Kubernetes ConfigMap
swaps a symlink, which inotify on the file misses. Every `refresh_interval` all files are re-read anyway.
A file that cannot be read or parsed keeps its last good targets (counted in sloguard_sd_file_read_errors).
"""

from __future__ import annotations

import asyncio
import glob
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from sloguard.config.fleet import DiscoverySpec, FileSDSpec
from sloguard.discovery import groups
from sloguard.discovery.groups import Target
from sloguard.discovery.metrics import SDStats
from sloguard.untrusted import Invalid, reject

log = logging.getLogger("sloguard.discovery")
POLL = 1.0
MAX_FILE_BYTES = 4 * 1024 * 1024
Publish = Callable[[list[Target]], None]
Signature = tuple[tuple[str, int, int, int], ...]


def expand(patterns: Sequence[str]) -> list[str]:
    """Return the files the patterns name now (a glob in the last element, as Prometheus allows), sorted."""
    out: set[str] = set()
    for p in patterns:
        out.update(glob.glob(p) if glob.has_magic(p) else [p])
    return sorted(out)


def signature(paths: Sequence[str]) -> Signature:
    """Return what changes when any file is replaced, rewritten or removed."""
    sig = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            sig.append((p, -1, -1, -1))
            continue
        sig.append((p, st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(sig)


def read_groups(path: str, spec: DiscoverySpec) -> list[Target]:
    """Return the targets of one file; raise Invalid or OSError when it cannot be used."""
    data = Path(path).read_bytes()[: MAX_FILE_BYTES + 1]
    if len(data) > MAX_FILE_BYTES:
        raise Invalid("too_large", f"over {MAX_FILE_BYTES} bytes")
    try:
        doc = json.loads(data) if path.endswith(".json") else yaml.safe_load(data)
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        raise Invalid("not_target_groups", f"{type(exc).__name__}") from None
    return groups.parse(doc, spec)


class FileSD:
    """Reads and watches one discovery's files; publishes the union of their targets after each change."""

    def __init__(self, spec: DiscoverySpec, publish: Publish, stats: SDStats, poll: float = POLL) -> None:
        assert spec.file_sd is not None
        self.spec, self.sd, self.publish, self.stats, self.poll = spec, spec.file_sd, publish, stats, poll
        self._good: dict[str, list[Target]] = {}

    async def run(self) -> None:
        """Watch until cancelled."""
        sd: FileSDSpec = self.sd
        last: Signature | None = None
        due = 0.0
        while True:
            paths = expand(sd.files)
            sig = signature(paths)
            if sig != last or time.monotonic() >= due:
                self.publish(await asyncio.to_thread(self.refresh, paths))  # published on the event loop
                last, due = sig, time.monotonic() + sd.refresh_interval
            await asyncio.sleep(self.poll)

    def refresh(self, paths: Sequence[str]) -> list[Target]:
        """Re-read every file and return the targets of all; a failing file keeps its last good targets."""
        start = time.perf_counter()
        ok = True
        self._good = {p: t for p, t in self._good.items() if p in paths}  # a removed file's targets go with it
        self.stats.file_mtimes = {}
        for p in paths:
            try:
                self._good[p] = read_groups(p, self.spec)
                self.stats.file_mtimes[p] = os.stat(p).st_mtime
            except FileNotFoundError:
                self._good.pop(p, None)  # listed by name but absent: no targets, as Prometheus
            except (OSError, Invalid) as exc:
                ok = False
                self.stats.failures["file_read"] += 1
                reason = exc.reason if isinstance(exc, Invalid) else "unreadable"
                reject(groups.SOURCE, reason, f"{self.spec.name}: {Path(p).name}: {exc}")
        found = [t for p in sorted(self._good) for t in self._good[p]]
        self.stats.refreshed(time.perf_counter() - start, ok, time.time())
        self.stats.discovered = len(found)
        return found
