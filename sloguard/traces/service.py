"""The daemon's side of per-request records: receiver + join + stage histograms + probe span export.

The daemon hands every drained probe result to `finalise` and stores / windows only what comes back:
results of `server_records: otlp` targets come back once their engine span arrived or `traces.hold` passed;
all others at once. Everything runs on the daemon's event loop except the span-export thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric

from sloguard.config.spec import Config
from sloguard.model import ProbeResult
from sloguard.traces import metrics
from sloguard.traces.join import Joiner

if TYPE_CHECKING:
    from sloguard.traces.client_spans import ClientSpans
    from sloguard.traces.otlp import Decoded
    from sloguard.traces.receiver import Receiver
    from sloguard.web.webconfig import WebConfig

log = logging.getLogger("sloguard.traces")
class RecordService:
    """Owns the join state, the optional receiver and the optional span exporter."""

    def __init__(self, cfg: Config, missed: Callable[[ProbeResult], bool]) -> None:
        t = cfg.traces
        self.joiner = Joiner(hold=t.hold, max_orphans=t.max_pending_spans, max_bytes=t.max_pending_bytes,
                             skew=t.receiver.clock_skew if t.receiver is not None else 30.0)
        self.stages = metrics.StageHistograms()
        self.receiver: Receiver | None = None
        self.spans: ClientSpans | None = None
        self._ready: list[ProbeResult] = []
        self._seen: dict[str, str] = {}  # target -> engine its /metrics showed (for `engine: auto`)
        self.reconfigure(cfg, missed)

    def reconfigure(self, cfg: Config, missed: Callable[[ProbeResult], bool]) -> None:
        """Apply per-target modes, the SLO-miss test (for sampling) and the hold bound; the listen address needs a
        restart."""
        self._modes = {t.name: (t.server_records, t.engine) for t in cfg.targets}
        self._missed = missed
        self.joiner.hold = cfg.traces.hold
        self.joiner.max_orphans = cfg.traces.max_pending_spans
        self.joiner.max_bytes = cfg.traces.max_pending_bytes
        self.stages.retain({p.name for p in cfg.probes})
        old = getattr(self, "_cfg", None)
        if old is not None and (old.traces.receiver, old.traces.export) != (cfg.traces.receiver, cfg.traces.export):
            log.warning("traces.receiver and traces.export changes take effect on restart only")
            cfg = cfg.model_copy(update={"traces": cfg.traces.model_copy(
                update={"receiver": old.traces.receiver, "export": old.traces.export})})
        self._cfg = cfg

    async def start(self, web_config: WebConfig | None = None) -> None:
        """Start the receiver (behind its own web config, else the daemon's) and the span exporter where configured."""
        t = self._cfg.traces
        if t.export is not None:
            from sloguard.traces.client_spans import ClientSpans

            self.spans = ClientSpans(t.export)
        if t.receiver is not None:
            from sloguard.traces.receiver import Receiver, Settings

            keep_raw = t.export is not None and t.export.forward_engine_spans
            self.receiver = Receiver(self._on_spans, receiver_web_config(t.receiver.web_config_file, web_config),
                                     Settings.of(t.receiver), keep_raw)
            port = await self.receiver.start(t.receiver.listen)
            log.info("OTLP receiver listening", extra={"listen": t.receiver.listen, "port": port})

    def _on_spans(self, decoded: Decoded) -> None:
        self.joiner.spans["irrelevant"] += decoded.irrelevant
        self.joiner.spans["malformed"] += decoded.malformed
        self.joiner.spans["overflow"] += decoded.overflow
        self._ready += self.joiner.add(decoded.spans, time.time())

    def engines_seen(self, engines: Mapping[str, str]) -> None:
        """Adopt the engine each target's /metrics showed, for targets configured `engine: auto`."""
        self._seen |= {t: e for t, e in engines.items() if e != "unknown"}

    def _mode(self, target: str) -> tuple[str, str]:
        mode, engine = self._modes.get(target, ("none", "auto"))
        return mode, self._seen.get(target, engine) if engine == "auto" else engine

    def finalise(self, results: Sequence[ProbeResult], now: float | None = None) -> list[ProbeResult]:
        """Return results final now: these (unless held) plus held ones completed or due."""
        now = time.time() if now is None else now
        offered = [(r, *self._mode(r.target)) for r in results]
        ready = self.joiner.offer(offered, now) + self._ready + self.joiner.due(now)
        self._ready = []
        return self._publish(ready)

    def flush(self) -> list[ProbeResult]:
        """Return every held result now (shutdown)."""
        ready, self._ready = self._ready + self.joiner.flush(), []
        return self._publish(ready)

    def _publish(self, ready: list[ProbeResult]) -> list[ProbeResult]:
        if ready:
            self.stages.observe(ready)
            if self.spans is not None:
                self.spans.offer(ready, self._missed)
        if self.joiner.forward:
            if self.spans is not None and self.spans.spec.forward_engine_spans:
                self.spans.forward(self.joiner.forward)
            self.joiner.forward = []
        return ready

    def families(self) -> list[Metric]:
        """Return the stage histograms and the join/receiver/export counters."""
        j = self.joiner
        receiver = self.receiver.requests if self.receiver is not None else {}
        export = self.spans.counts if self.spans is not None else {}
        return [self.stages.family(), *metrics.counters(j.spans, receiver, j.records, j.negative, export),
                *metrics.gauges(j.pending, j.orphans, j.held_bytes)]

    async def stop(self) -> None:
        """Stop the receiver and flush the exporter (bounded: 2 s)."""
        if self.receiver is not None:
            await self.receiver.stop()
        if self.spans is not None:
            import asyncio

            await asyncio.to_thread(self.spans.close, 2.0)


def receiver_web_config(path: str | None, daemon: WebConfig | None) -> WebConfig:
    """Return the receiver's web config: its own file, else the daemon's --web.config.file (TLS and auth too).

    Warn when the receiver ends up less protected than the web listener (its own file lacks TLS or auth that
    the daemon's has): spans from anyone who reaches the port then count.
    """
    from sloguard.web.webconfig import WebConfig, load_web_config

    daemon = daemon or WebConfig()
    if path is None:
        return daemon
    own = load_web_config(path)
    weaker = [what for what, theirs, ours in (
        ("TLS", daemon.ssl_context is not None, own.ssl_context is not None),
        ("authentication", daemon.authenticates, own.authenticates)) if theirs and not ours]
    if weaker:
        log.warning("the OTLP receiver is less protected than the web listener: its web config has no "
                    + " and no ".join(weaker), extra={"receiver_web_config": path, "web_config": daemon.path})
    return own
