"""Run every configured discovery as its own task; each publishes its full target list into the registry."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prometheus_client.metrics_core import Metric

from sloguard.config.fleet import DiscoverySpec
from sloguard.discovery import metrics
from sloguard.discovery.groups import Target
from sloguard.discovery.metrics import SDStats

log = logging.getLogger("sloguard.discovery")


def _runner(spec: DiscoverySpec, publish: Callable[[list[Target]], None], stats: SDStats, token: str | None) -> Any:
    if spec.file_sd is not None:
        from sloguard.discovery.files import FileSD

        return FileSD(spec, publish, stats)
    if spec.http_sd is not None:
        from sloguard.discovery.http import HTTPSD

        return HTTPSD(spec, publish, stats, token)
    from sloguard.discovery.kube import KubernetesSD

    return KubernetesSD(spec, publish, stats)


class Discoveries:
    """Discovery tasks by name; `found` holds each one's latest good list; `on_change` is called after a change."""

    def __init__(self, on_change: Callable[[], None]) -> None:
        self.on_change = on_change
        self.found: dict[str, list[Target]] = {}
        self._tasks: dict[str, tuple[DiscoverySpec, asyncio.Task[None], SDStats]] = {}

    def reconfigure(self, specs: Sequence[DiscoverySpec], tokens: Mapping[str, str]) -> None:
        """Start new and changed discoveries, stop removed and changed ones (an unchanged one keeps running)."""
        wanted = {s.name: s for s in specs}
        for name, (spec, task, _) in list(self._tasks.items()):
            if wanted.get(name) != spec:
                task.cancel()
                del self._tasks[name]
                if name not in wanted:
                    self.found.pop(name, None)
        for name, spec in wanted.items():
            if name not in self._tasks:
                stats = SDStats(name, spec.mechanism)
                runner = _runner(spec, functools.partial(self._publish, name), stats, tokens.get(name))
                self._tasks[name] = (spec, asyncio.create_task(self._guard(name, runner)), stats)

    async def _guard(self, name: str, runner: Any) -> None:
        while True:
            try:
                await runner.run()
                return
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug in one discovery must not end it for good
                log.exception("discovery crashed; restarting in 5s", extra={"discovery": name})
                await asyncio.sleep(5.0)

    def _publish(self, name: str, found: list[Target]) -> None:
        if name not in self._tasks:
            return  # stopped by a reload while it ran
        if self.found.get(name) == found:
            return
        self.found[name] = found
        self.on_change()

    def families(self) -> list[Metric]:
        """Return the sloguard_sd_* families."""
        return metrics.families([stats for _, _, stats in self._tasks.values()])

    async def close(self) -> None:
        """Cancel every discovery and wait for them to end."""
        tasks = [t for _, t, _ in self._tasks.values()]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
        self._tasks.clear()
