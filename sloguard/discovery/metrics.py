"""The `sloguard_sd_*` series, named as Prometheus names its own (`prometheus_sd_*`), with a `config` label."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric

from sloguard.families import declare


@dataclass
class SDStats:
    """What one discovery did: refreshes, failures by kind, the targets it holds now."""

    config: str
    mechanism: str
    discovered: int = 0
    refreshes: int = 0
    refresh_seconds: float = 0.0
    refresh_failures: int = 0
    last_success: float | None = None
    failures: Counter[str] = field(default_factory=Counter)  # http, file_read, kubernetes
    events: Counter[tuple[str, str]] = field(default_factory=Counter)  # kubernetes (role, event)
    file_mtimes: dict[str, float] = field(default_factory=dict)

    def refreshed(self, seconds: float, ok: bool, now: float) -> None:
        """Count one refresh (a full list fetched or read, or a watch relist) and its outcome."""
        self.refreshes += 1
        self.refresh_seconds += seconds
        if ok:
            self.last_success = now
        else:
            self.refresh_failures += 1


FOUND = declare("sloguard_sd_discovered_targets", "gauge", "Targets the discovery holds now (the last good list while "
                "refreshes fail).", ("config",))
DURATION = declare("sloguard_sd_refresh_duration_seconds", "summary", "Duration of discovery refreshes.",
                   ("mechanism", "config"))
FAILS = declare("sloguard_sd_refresh_failures", "counter", "Refreshes that failed (the last good list was kept).",
                ("mechanism", "config"))
LAST = declare("sloguard_sd_last_success_timestamp_seconds", "gauge", "Unix time of the last successful refresh.",
               ("config",))
HTTP = declare("sloguard_sd_http_failures", "counter", "HTTP service discovery refresh failures.", ("config",))
READ = declare("sloguard_sd_file_read_errors", "counter", "File service discovery read errors.", ("config",))
MTIME = declare("sloguard_sd_file_mtime_seconds", "gauge", "Modification time of each file_sd file read.",
                ("config", "filename"))
KUBE = declare("sloguard_sd_kubernetes_events", "counter", "Kubernetes watch events handled.",
               ("config", "role", "event"))
KFAIL = declare("sloguard_sd_kubernetes_failures", "counter", "Kubernetes list or watch requests that failed.",
                ("config",))


def families(stats: list[SDStats]) -> list[Metric]:
    """Return sloguard_sd_* for every discovery."""
    found, dur, fails, last = FOUND.gauge(), DURATION.new(), FAILS.counter(), LAST.gauge()
    http, read, mtime, kube, kfail = HTTP.counter(), READ.counter(), MTIME.gauge(), KUBE.counter(), KFAIL.counter()
    for st in sorted(stats, key=lambda s: s.config):
        found.add_metric([st.config], st.discovered)
        ids = {"mechanism": st.mechanism, "config": st.config}
        dur.add_sample(dur.name + "_count", ids, st.refreshes)
        dur.add_sample(dur.name + "_sum", ids, st.refresh_seconds)
        fails.add_metric([st.mechanism, st.config], st.refresh_failures)
        if st.last_success is not None:
            last.add_metric([st.config], st.last_success)
        if st.mechanism == "http":
            http.add_metric([st.config], st.failures["http"])
        elif st.mechanism == "file":
            read.add_metric([st.config], st.failures["file_read"])
            for name, t in sorted(st.file_mtimes.items()):
                mtime.add_metric([st.config, name], t)
        else:
            kfail.add_metric([st.config], st.failures["kubernetes"])
            for (role, event), n in sorted(st.events.items()):
                kube.add_metric([st.config, role, event], n)
    return [f for f in (found, dur, fails, last, http, read, mtime, kube, kfail) if f.samples]
