"""The names and label values sloguard exports, so `check` can reject alert selectors that match nothing.

Names: the series (`_total`, `_bucket` ... included) and each one's label names come from the exporter's own
declarations (sloguard.catalog); an unknown name or label can never select a series, whatever the
matcher. Values: only `label="value"` matchers on `sloguard_*` metrics are checked (regex and negative matchers,
and `label=""`, which selects series without the label, always pass). The known values per label name are the
union over every family that carries the label; a value outside it can never select a series.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import get_args

from sloguard import model
from sloguard.catalog import label_known
from sloguard.config.burnwindows import windows_for
from sloguard.config.expr import Matcher
from sloguard.config.spec import Config, Stage
from sloguard.config.units import format_duration

SERVER_QUANTILES = tuple(str(q) for q in model.SERVER_QUANTILES)
SERVER_WINDOWS = model.SERVER_WINDOWS
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


SCRAPE_LABELS = ("job", "instance")  # added by Prometheus at scrape, never seen by sloguard's own rule engine


def _close(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return f"; did you mean {close[0]}?" if close else ""


def _group(name: str, series: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Return the known series sharing the name's first two words (sloguard_slo_*), else every family prefix."""
    head = "_".join(name.split("_")[:2]) + "_"
    same = sorted(n for n in series if n.startswith(head))
    return same or sorted({"_".join(n.split("_")[:2]) + "_*" for n in series})


def unknown_names(metric: str, matchers: Sequence[Matcher], series: Mapping[str, tuple[str, ...]]) -> Iterable[str]:
    """Yield one message for a metric sloguard does not export, else one per label name it never carries."""
    labels = series.get(metric)
    if labels is None:
        hint = _quantile_hint(metric) or _close(metric, series)
        if not metric.startswith("sloguard_"):
            hint = " (its own rule engine sees only sloguard's series: put this one in a Prometheus rule)"
        yield f"sloguard does not export {metric}{hint} (known: {', '.join(_group(metric, series))})"
        return
    for m in matchers:
        if m.label == "__name__" or label_known(m.label, labels):
            continue
        named = [n for n in labels if not n.endswith("*")]
        hint = (" (Prometheus adds it when it scrapes; sloguard's own rule engine never sees it)"
                if m.label in SCRAPE_LABELS else _close(m.label, named))
        yield f"{metric} has no label {m.label}{hint} (its labels: {', '.join(labels) or 'none'})"


_PER_QUANTILE = re.compile(r"^sloguard_(?:slo_)?(ttft|ttfot|tpot|itl|e2e|decode)_p(\d+(?:\.\d+)?)(?:_seconds)?$")


def _quantile_hint(metric: str) -> str:
    """Return the quantile family's selector for a per-quantile name (sloguard_slo_ttft_p95_seconds), else ""."""
    m = _PER_QUANTILE.match(metric)
    if m is None:
        return ""
    return (f"; quantiles are one family: sloguard_slo_quantile_seconds{{metric=\"{m.group(1)}\","
            f"quantile=\"{float(m.group(2)) / 100:g}\",window=\"5m\"}}")


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
