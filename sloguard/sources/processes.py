"""The configured serving processes, found by pid file, name and/or command line (psutil)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from sloguard.config.spec import ProcessSpec


class ProcessFinder:
    """Find each configured process by pid file, name and/or cmdline regex; the oldest match wins."""

    def __init__(self, specs: Sequence[ProcessSpec], psutil_mod: ModuleType) -> None:
        self.specs = tuple(specs)
        self.ps = psutil_mod
        self._regex = {s.name: re.compile(s.cmdline_regex) for s in specs if s.cmdline_regex}
        self._cache: dict[str, Any] = {}

    def find_all(self) -> dict[str, Any]:
        """Return {spec name: psutil.Process} for the specs that match a running process now."""
        return {s.name: p for s in self.specs if (p := self.find(s)) is not None}

    def find(self, spec: ProcessSpec) -> Any:
        """Return the matching psutil.Process, or None."""
        if spec.pid_file:
            return self._from_pid_file(spec)
        cached = self._cache.get(spec.name)
        if cached is not None and cached.is_running():  # is_running also checks the start time
            return cached
        found = self._scan(spec)
        self._cache[spec.name] = found
        return found

    def owner(self, pid: int, matched: Mapping[str, Any]) -> str:
        """Return the spec name whose process is `pid` or one of its ancestors, else ""."""
        by_pid = {p.pid: name for name, p in matched.items()}
        if pid in by_pid:
            return by_pid[pid]
        try:
            parents = self.ps.Process(pid).parents()
        except (self.ps.Error, OSError):  # not visible from here (another PID namespace) or gone
            return ""
        return next((by_pid[p.pid] for p in parents if p.pid in by_pid), "")

    def _from_pid_file(self, spec: ProcessSpec) -> Any:
        try:
            with open(spec.pid_file or "") as fh:
                proc = self.ps.Process(int(fh.read().strip()))
            info = proc.as_dict(["name", "cmdline"])
        except (OSError, ValueError, self.ps.Error):
            return None
        return proc if self._accepts(spec, info) else None

    def _scan(self, spec: ProcessSpec) -> Any:
        found = [p for p in self.ps.process_iter(["name", "cmdline", "create_time"])
                 if p.pid != os.getpid() and self._accepts(spec, p.info)]
        # oldest first: the serving parent rather than its workers; pid breaks start-time ties (10 ms ticks)
        return min(found, key=lambda p: (p.info["create_time"] or 0.0, p.pid), default=None)

    def _accepts(self, spec: ProcessSpec, info: Mapping[str, Any]) -> bool:
        name = spec.process_name or (None if spec.cmdline_regex or spec.pid_file else spec.name)
        if name is not None and info.get("name") != name:
            return False
        regex = self._regex.get(spec.name)
        return regex is None or regex.search(" ".join(info.get("cmdline") or ())) is not None


def describe(spec: ProcessSpec) -> str:
    """Return how a process spec matches, for messages."""
    parts = [f"pid_file {spec.pid_file}" if spec.pid_file else "",
             f"name {spec.process_name or (spec.name if not (spec.cmdline_regex or spec.pid_file) else '')}"
             if spec.process_name or not (spec.cmdline_regex or spec.pid_file) else "",
             f"cmdline_regex {spec.cmdline_regex!r}" if spec.cmdline_regex else ""]
    return ", ".join(p for p in parts if p)


def unmatched(specs: Sequence[ProcessSpec]) -> list[str]:
    """Return one line per configured process that matches no running process now (`sloguard check --online`)."""
    import psutil

    finder = ProcessFinder(specs, psutil)
    return [f"host: process {s.name}: matches no running process ({describe(s)})" for s in specs
            if finder.find(s) is None]
