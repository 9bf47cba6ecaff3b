"""The contract every source fulfils for the runner: collect on a schedule, export families, hand data on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.metrics_core import Metric


class SourceError(Exception):
    """A collection failed for a known reason; `reason` is a short label value, the message is logged once."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[type[SourceError], tuple[str, str]]:
        return type(self), (self.reason, str(self))  # crosses the parser-process boundary intact


class SourceAbsent(SourceError):
    """What the source reads does not exist on this host (no NVIDIA driver under `nvml: auto`).

    The runner exports nothing for such a source, not even `sloguard_source_up`, and logs the reason once,
    so a GPU-less host neither pretends to collect GPU data nor raises collection alerts.
    """


@dataclass(frozen=True)
class SourceOutput:
    """What one collection produced: families to export as-is, and typed data for the core (or None)."""

    families: Sequence[Metric] = ()
    payload: object = None


class Source(Protocol):
    """A source the runner schedules; `collect` must be cancellable and must not block the event loop."""

    kind: str
    target: str
    interval: float
    timeout: float

    async def collect(self) -> SourceOutput:
        """Collect once; raise SourceError for a reported failure. Never called concurrently with itself."""
        ...

    async def close(self) -> None:
        """Release connections and handles; called on reload and shutdown."""
        ...
