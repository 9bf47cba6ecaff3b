"""Watch the server during a stage: scrape its /metrics (sloguard.sources) and sample NVML where present."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from sloguard.bench.serverview import GPU_GAUGES, GpuSample
from sloguard.config.spec import GPUSpec, TargetSpec
from sloguard.model import ServerView
from sloguard.sources.base import SourceAbsent, SourceError
from sloguard.sources.scrape import ScrapeSource

log = logging.getLogger("sloguard.bench")


class ServerWatch:
    """Scrape one target every `interval` seconds while running; keep every view and failure reason."""

    def __init__(self, target: TargetSpec, api_key: str | None, interval: float, nvml: bool = True,
                 nvml_module: Any = None) -> None:
        self.views: list[ServerView] = []
        self.gpu: list[GpuSample] = []
        self.failures: dict[str, int] = {}
        self.interval = interval
        self._scrape = (ScrapeSource(target, secrets={target.name: api_key} if api_key else None)
                        if target.metrics_url else None)
        self._nvml: Any = _nvml_source(nvml_module) if nvml else None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    @property
    def scraping(self) -> bool:
        """Return whether the target has a metrics_url to scrape."""
        return self._scrape is not None

    def start(self) -> None:
        """Start sampling now (first sample immediately), then every interval."""
        self._stopping = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    async def sample(self) -> None:
        """Take one scrape and one GPU sample now."""
        if self._scrape is not None:
            try:
                async with asyncio.timeout(self._scrape.timeout):
                    out = await self._scrape.collect()
                if isinstance(out.payload, ServerView):
                    self.views.append(out.payload)
            except (SourceError, TimeoutError) as exc:
                reason = getattr(exc, "reason", "timeout")
                self.failures[reason] = self.failures.get(reason, 0) + 1
        if self._nvml is not None:
            await self._sample_gpu()

    async def stop(self) -> None:
        """Stop the periodic sampling and take a final sample (the stage's end)."""
        if self._task is not None:
            self._stopping.set()  # ends the loop even where a cancel gets swallowed (3.11's wait_for did)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.sample()

    async def close(self) -> None:
        """Release connections and NVML."""
        if self._scrape is not None:
            await self._scrape.close()
        if self._nvml is not None:
            await self._nvml.close()

    def reset(self) -> None:
        """Forget the samples of the previous stage."""
        self.views, self.gpu, self.failures = [], [], {}

    async def _run(self) -> None:
        while not self._stopping.is_set():
            await self.sample()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._stopping.wait()

    async def _sample_gpu(self) -> None:
        try:
            out = await self._nvml.collect()
        except SourceAbsent:
            self._nvml = None
            return
        except SourceError as exc:
            self.failures[f"nvml_{exc.reason}"] = self.failures.get(f"nvml_{exc.reason}", 0) + 1
            return
        values = {(fam.name, s.labels.get("uuid", "")): float(s.value)
                  for fam in out.families if fam.name in GPU_GAUGES for s in fam.samples}
        if values:
            self.gpu.append((time.time(), values))


def _nvml_source(module: Any = None) -> Any:
    """Return an NVML source (reports absent without a driver), or None where it cannot be built."""
    try:
        from sloguard.gpu.nvml import NVMLSource

        return NVMLSource(GPUSpec(nvml="auto", gpm=True), nvml=module)
    except Exception:  # NVML is optional for a bench: its absence is the normal case off GPU hosts
        log.debug("NVML unavailable", exc_info=True)
        return None
