"""sloguard's own series: build info, reload state, evaluation cost, probe-process health."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from prometheus_client.core import InfoMetricFamily
from prometheus_client.metrics_core import Metric

from sloguard import __version__, untrusted
from sloguard.families import declare


@dataclass(frozen=True, slots=True)
class SelfState:
    """What the daemon knows about itself at one moment."""

    reload_ok: bool
    reload_ts: float
    eval_seconds: float
    render_seconds: float
    worker_up: bool
    worker_restarts: int
    started: float


BUILD = declare("sloguard_build", "info", "sloguard version and runtime (constant).", ("version", "python"))
_GAUGES = tuple(declare(name, "gauge", doc) for name, doc in (
    ("sloguard_config_last_reload_successful", "1 if the last config (re)load succeeded."),
    ("sloguard_config_last_reload_success_timestamp_seconds", "Unix time of the last good load."),
    ("sloguard_evaluation_duration_seconds", "Duration of the last evaluation cycle."),
    ("sloguard_exposition_render_seconds",
     "Duration of the last uncached /metrics render (renders happen at most once per change)."),
    ("sloguard_probe_worker_up", "1 while the probe process is alive."),
    ("sloguard_start_time_seconds", "Unix time the daemon started."),
))
RESTARTS = declare("sloguard_probe_worker_restarts", "counter", "Probe processes restarted after dying.")


def self_families(st: SelfState) -> list[Metric]:
    """Return the daemon's own families (8 series plus one per (source, reason) of invalid input seen)."""
    info = BUILD.new()
    assert isinstance(info, InfoMetricFamily)
    info.add_metric([], {"version": __version__, "python": platform.python_version()})
    fams: list[Metric] = [info]
    values = (float(st.reload_ok), st.reload_ts, st.eval_seconds, st.render_seconds, float(st.worker_up), st.started)
    for fd, value in zip(_GAUGES, values, strict=True):
        g = fd.gauge()
        g.add_metric([], value)
        fams.append(g)
    restarts = RESTARTS.counter()
    restarts.add_metric([], st.worker_restarts)
    fams.append(restarts)
    return fams + untrusted.families()
