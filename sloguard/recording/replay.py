"""Replay a recording through sources → windows → SLO evaluation → diagnosis on an injected clock (pure).

The same components the daemon builds from the recorded config, fed the recorded events in their order: each
page is parsed and normalised (sources.limits.digest) into the server windows, each drain's raw probe results
go through the record join (traces.RecordService: in-band records, the head and queue derivations of the
target's engine) into the SLO windows, and each evaluation runs the SLO engine and the diagnosis at its
recorded time. No sleeping, no sockets, no wall clock: the same recording gives the same verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sloguard.clock import FakeClock
from sloguard.components import server_horizon
from sloguard.config.load import load_config_text
from sloguard.config.spec import Config
from sloguard.diagnose.inputs import slo_misses
from sloguard.diagnose.model import Verdict
from sloguard.diagnose.service import Diagnoser
from sloguard.model import Sample, ServerView
from sloguard.recording.codec import drain_of, samples_of
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import missed_slo, slos_from_config
from sloguard.slo.result import SLOStatus
from sloguard.sources.base import SourceError
from sloguard.sources.limits import ScrapeLimits, digest
from sloguard.sources.parse import ParseError
from sloguard.traces.service import RecordService
from sloguard.windows.server import ServerWindows


@dataclass(frozen=True)
class Step:
    """One replayed evaluation of one SLO: whether its objectives missed, and the verdict published."""

    t: float
    slo: str
    breached: bool  # an objective (or goodput) misses over the SLO's shortest window
    verdict: Verdict
    load: tuple[float, ...] = ()


@dataclass
class Replay:
    """The daemon's evaluation path over one recording; feed events in order, read `steps`."""

    cfg: Config
    start: float
    steps: list[Step] = field(default_factory=list)
    use_host: bool = True  # False: as a daemon without host.processes would have seen it

    def __post_init__(self) -> None:
        self.clock = FakeClock(self.start)
        slos = slos_from_config(self.cfg)
        self.slo = SLOEngine(slos, self.clock)
        self.server = ServerWindows(max_age=server_horizon(slos))
        self.records = RecordService(self.cfg, partial(missed_slo, slos=tuple(slos)))
        self.diagnosis = Diagnoser(self.cfg)
        self.targets = {t.name: t for t in self.cfg.targets}
        self.limits = {t.name: ScrapeLimits.of(t) for t in self.cfg.targets}
        self.host: list[Sample] = []
        self.pages = self.bad_pages = 0

    def feed(self, event: Mapping[str, Any]) -> None:
        """Apply one recorded event at its time (events must come in recorded order)."""
        kind, t = event.get("kind"), float(event.get("t", self.clock.now()))
        if t > self.clock.now():
            self.clock.set(t)
        if kind == "page":
            self._page(str(event["target"]), t, str(event["text"]))
        elif kind == "host" and self.use_host:
            self.host = samples_of(event["samples"])
        elif kind == "drain":
            d = drain_of(event)
            self.diagnosis.observe_probes(d.started, d.t, d.reached, d.prefilled)
            self.records.engines_seen(self.server.engines())
            results = self.records.finalise(d.results, now=d.t)
            if results:
                self.slo.add_probe_results(results)
        elif kind == "evaluate":
            self._evaluate(t, tuple(event.get("load", ())))

    def _page(self, target: str, t: float, text: str) -> None:
        spec = self.targets.get(target)
        if spec is None:
            return
        try:
            view = digest(text, spec, t, self.limits[target]).view
        except (SourceError, ParseError, ValueError):
            self.bad_pages += 1
            return
        self.pages += 1
        if isinstance(view, ServerView):
            self.server.add(view)

    def _evaluate(self, now: float, load: tuple[float, ...]) -> None:
        statuses = self.slo.evaluate(now, self.server)
        self.diagnosis.step(now, statuses, self.slo, self.server, self.host)
        for st in statuses:
            v = self.diagnosis.verdicts.get(st.slo.name)
            if v is not None:
                self.steps.append(Step(now, st.slo.name, _breached(st), v, load))


def _breached(st: SLOStatus) -> bool:
    return bool(slo_misses(st))


def replay(events: Sequence[Mapping[str, Any]], use_host: bool = True) -> Replay:
    """Return the finished replay of a recording's events (the first is its header); `use_host` False replays it
    as a daemon that watches no process (the host reads left out, `host.processes` emptied)."""
    header = events[0]
    cfg = load_config_text(str(header["config"]), "<recording>")
    if not use_host:
        cfg = cfg.model_copy(update={"host": cfg.host.model_copy(update={"processes": []})})
    run = Replay(cfg, float(header["t"]), use_host=use_host)
    for event in events[1:]:
        run.feed(event)
    return run


def marks(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return the recording's fault marks in time order."""
    return sorted((dict(e) for e in events if e.get("kind") == "mark"), key=lambda m: float(m.get("t", 0.0)))


def meta(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Return the header's meta merged with every later meta event."""
    out = dict(events[0].get("meta", {}))
    for e in events:
        if e.get("kind") == "meta":
            out |= {k: v for k, v in e.items() if k != "kind"}
    return out
