"""The daemon's side of per-request records: receiver + join + stage histograms + probe span export.

The daemon hands every drained probe result to `finalise` and stores / windows only what comes back:
results of `server_records: otlp` targets come back once their engine span arrived or `traces.hold` passed;
all others at once. Everything runs on the daemon's event loop except the span-export thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric

from sloguard.config.spec import Config
from sloguard.model import ProbeResult
from sloguard.slo.model import GOODPUT_FIELDS, SLO, is_good
from sloguard.traces import metrics
from sloguard.traces.join import Joiner

if TYPE_CHECKING:
    from sloguard.traces.client_spans import ClientSpans
    from sloguard.traces.otlp import Decoded
    from sloguard.traces.receiver import Receiver

log = logging.getLogger("sloguard.traces")
_OBJECTIVE_FIELDS = {**GOODPUT_FIELDS, "ttfot": "ttfot_s"}


def missed_slo(r: ProbeResult, slos: Sequence[SLO]) -> bool:
    """Return True if a request missed a goodput threshold or exceeded an objective threshold of its SLOs."""
    for s in slos:
        if s.source != "probe" or s.target != r.target or (s.probe is not None and s.probe != r.probe):
            continue
        if s.goodput is not None and not is_good(r, s.goodput):
            return True
        for o in s.objectives:
            attr = _OBJECTIVE_FIELDS.get(o.metric)
            value = getattr(r, attr) if attr else None
            if value is not None and value > o.threshold:
                return True
    return False


class RecordService:
    """Owns the join state, the optional receiver and the optional span exporter."""

    def __init__(self, cfg: Config, slos: Sequence[SLO]) -> None:
        t = cfg.traces
        self.joiner = Joiner(hold=t.hold, max_orphans=t.max_pending_spans)
        self.stages = metrics.StageHistograms()
        self.receiver: Receiver | None = None
        self.spans: ClientSpans | None = None
        self._ready: list[ProbeResult] = []
        self.reconfigure(cfg, slos)

    def reconfigure(self, cfg: Config, slos: Sequence[SLO]) -> None:
        """Apply per-target modes, SLOs (for sampling) and the hold bound; the listen address needs a restart."""
        self._modes = {t.name: (t.server_records, t.engine) for t in cfg.targets}
        self._slos = tuple(slos)
        self.joiner.hold = cfg.traces.hold
        self.joiner.max_orphans = cfg.traces.max_pending_spans
        self.stages.retain({p.name for p in cfg.probes})
        old = getattr(self, "_cfg", None)
        if old is not None and (old.traces.receiver, old.traces.export) != (cfg.traces.receiver, cfg.traces.export):
            log.warning("traces.receiver and traces.export changes take effect on restart only")
            cfg = cfg.model_copy(update={"traces": cfg.traces.model_copy(
                update={"receiver": old.traces.receiver, "export": old.traces.export})})
        self._cfg = cfg

    async def start(self) -> None:
        """Start the receiver and the span exporter where configured."""
        t = self._cfg.traces
        if t.export is not None:
            from sloguard.traces.client_spans import ClientSpans

            self.spans = ClientSpans(t.export)
        if t.receiver is not None:
            from sloguard.exporter.webconfig import load_web_config
            from sloguard.traces.receiver import Receiver

            keep_raw = t.export is not None and t.export.forward_engine_spans
            self.receiver = Receiver(self._on_spans, load_web_config(t.receiver.web_config_file),
                                     t.receiver.max_body_bytes, keep_raw)
            port = await self.receiver.start(t.receiver.listen)
            log.info("OTLP receiver listening", extra={"listen": t.receiver.listen, "port": port})

    def _on_spans(self, decoded: Decoded) -> None:
        self.joiner.spans["irrelevant"] += decoded.irrelevant
        self.joiner.spans["malformed"] += decoded.malformed
        self._ready += self.joiner.add(decoded.spans, time.time())

    def finalise(self, results: Sequence[ProbeResult], now: float | None = None) -> list[ProbeResult]:
        """Return results final now: these (unless held) plus held ones completed or due."""
        now = time.time() if now is None else now
        offered = [(r, *self._modes.get(r.target, ("none", "auto"))) for r in results]
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
                self.spans.offer(ready, lambda r: missed_slo(r, self._slos))
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
                *metrics.gauges(j.pending, j.orphans)]

    async def stop(self) -> None:
        """Stop the receiver and flush the exporter (bounded: 2 s)."""
        if self.receiver is not None:
            await self.receiver.stop()
        if self.spans is not None:
            import asyncio

            await asyncio.to_thread(self.spans.close, 2.0)
