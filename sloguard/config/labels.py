"""The label values sloguard exports for a config, so `check` can reject alert selectors that match nothing.

Only `label="value"` matchers on `sloguard_*` metrics are checked (regex and negative matchers, and
`label=""`, which selects series without the label, always pass). The known values per label name are the
union over every family that carries the label; a value outside it can never select a series.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import get_args

from sloguard.alerts.expr import Matcher
from sloguard.config.spec import Config, Stage
from sloguard.config.units import format_duration
from sloguard.slo.burnrate import windows_for

SERVER_WINDOWS = (60.0, 300.0)  # sloguard.windows.server.ServerWindows' windows (a test keeps them equal)
SERVER_QUANTILES = ("0.5", "0.9", "0.95", "0.99")
STAGE_QUANTILES = ("0.5", "0.95", "0.99")
SLIS = ("availability", "latency")


def known_values(cfg: Config) -> dict[str, set[str]]:
    """Return label name -> every value sloguard can export for it under this config."""
    windows = {format_duration(w) for s in cfg.slos for w in windows_for(s.error_budget_window)}
    quantiles = {f"{o.percentile / 100:g}" for s in cfg.slos for o in s.objectives}
    return {
        "slo": {s.name for s in cfg.slos},
        "target": {t.name for t in cfg.targets},
        "probe": {p.name for p in cfg.probes},
        "window": windows | {format_duration(w) for w in SERVER_WINDOWS},
        "metric": {o.metric for s in cfg.slos for o in s.objectives},
        "quantile": quantiles | set(SERVER_QUANTILES) | set(STAGE_QUANTILES),
        "percentile": {f"{o.percentile:g}" for s in cfg.slos for o in s.objectives},
        "sli": set(SLIS),
        "stage": set(get_args(Stage)),
        "prompt_bucket": {*cfg.probe_settings.prompt_buckets, "long"},
    }


def unknown_values(metric: str, matchers: Sequence[Matcher], known: dict[str, set[str]]) -> Iterable[str]:
    """Yield one message per `label="value"` matcher whose value sloguard never exports for that label."""
    if not metric.startswith("sloguard_"):
        return
    for m in matchers:
        values = known.get(m.label)
        if m.op != "=" or not m.value or values is None or m.value in values:
            continue
        listed = ", ".join(sorted(values)) or "none configured"
        yield f'{m.label}="{m.value}" matches no series: sloguard exports {m.label} values {listed}'
