"""sloguard's own series: build info, reload state, evaluation cost, probe-process health."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric

from sloguard import __version__


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


def self_families(st: SelfState) -> list[Metric]:
    """Return the daemon's own families (constant-cost: 8 series)."""
    info = InfoMetricFamily("sloguard_build", "sloguard version and runtime (constant).")
    info.add_metric([], {"version": __version__, "python": platform.python_version()})
    fams: list[Metric] = [info]
    for name, doc, value in (
        ("sloguard_config_last_reload_successful", "1 if the last config (re)load succeeded.", float(st.reload_ok)),
        ("sloguard_config_last_reload_success_timestamp_seconds", "Unix time of the last good load.", st.reload_ts),
        ("sloguard_evaluation_duration_seconds", "Duration of the last evaluation cycle.", st.eval_seconds),
        ("sloguard_exposition_render_seconds",
         "Duration of the last uncached /metrics render (renders happen at most once per change).",
         st.render_seconds),
        ("sloguard_probe_worker_up", "1 while the probe process is alive.", float(st.worker_up)),
        ("sloguard_start_time_seconds", "Unix time the daemon started.", st.started),
    ):
        g = GaugeMetricFamily(name, doc)
        g.add_metric([], value)
        fams.append(g)
    restarts = CounterMetricFamily("sloguard_probe_worker_restarts", "Probe processes restarted after dying.")
    restarts.add_metric([], st.worker_restarts)
    fams.append(restarts)
    return fams
