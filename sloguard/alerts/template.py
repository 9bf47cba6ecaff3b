"""The subset of Prometheus alert templates the live engine renders, so one annotation text serves both paths.

Supported: `{{ $labels.x }}`, `{{ $value }}`, `{{ $value | printf "%.2f" }}`, and one query form that reads
another series: `{{ with query "sloguard_x{slo='a',sli='b'}[ * N]" }}{{ . | first | value | F }}{{ end }}`
(the selector may be wrapped in `min(...)`: the least of the matching series) with F one of
`humanizePercentage`, `humanizeDuration` or `printf "%.3g"`. In Prometheus that is a PromQL query; here it looks
the selector up in the evaluated samples (first match, or the least; nothing when none). The humanize
functions follow Prometheus' (Go's %.4g; d/h/m/s).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

from sloguard.config.expr import ExprError, Matcher, parse_selector

Lookup = Callable[[str, tuple[Matcher, ...]], list[float]]  # every matching series' value, in series order
_PRINTF = r'(?:\s*\|\s*printf\s+"(%[-+ #0]*\d*(?:\.\d+)?[fgeGE])")?'
_TEMPLATE = re.compile(r"\{\{\s*\$(?:labels\.([a-zA-Z_][a-zA-Z0-9_]*)|value" + _PRINTF + r")\s*\}\}")
_QUERY = re.compile(
    r'\{\{\s*with\s+query\s+"([^"]*)"\s*\}\}'
    r'\{\{\s*\.\s*\|\s*first\s*\|\s*value\s*\|\s*(humanizePercentage|humanizeDuration|printf\s+"(%[^"]*)")\s*\}\}'
    r"\{\{\s*end\s*\}\}")
_SCALED = re.compile(r"^(.*?)\s*\*\s*([-+]?[0-9.]+(?:[eE][-+]?\d+)?)\s*$")
_MIN = re.compile(r"^\s*min\s*\((.*)\)\s*$")


def humanize_percentage(v: float) -> str:
    """Return Prometheus' humanizePercentage: %.4g of v × 100, with a % sign."""
    return f"{v * 100:.4g}%"


def humanize_duration(v: float) -> str:
    """Return Prometheus' humanizeDuration: "1d 2h 3m 4s" down to "4.5s" (sub-second: ms, us, ...)."""
    if math.isnan(v) or math.isinf(v):
        return f"{v:.4g}"
    if v == 0:
        return "0s"
    if abs(v) >= 1:
        sign, d = ("-", int(-v)) if v < 0 else ("", int(v))
        days, hours, minutes, seconds = d // 86400, d // 3600 % 24, d // 60 % 60, d % 60
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {seconds}s"
        if minutes:
            return f"{sign}{minutes}m {seconds}s"
        return f"{sign}{abs(v):.4g}s"
    prefix = ""
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return f"{v:.4g}{prefix}s"


def _query(m: re.Match[str], lookup: Lookup | None) -> str:
    if lookup is None:
        return ""
    text = m.group(1)
    scaled = _SCALED.match(text)
    factor = float(scaled.group(2)) if scaled else 1.0
    selector = scaled.group(1) if scaled else text
    least = _MIN.match(selector)
    try:
        metric, matchers = parse_selector(least.group(1) if least else selector)
    except ExprError:
        return ""
    values = lookup(metric, matchers)
    if not values:
        return ""
    value = (min(values) if least else values[0]) * factor
    if m.group(2) == "humanizePercentage":
        return humanize_percentage(value)
    if m.group(2) == "humanizeDuration":
        return humanize_duration(value)
    return m.group(3) % value


def _expand(m: re.Match[str], labels: Mapping[str, str], value: float) -> str:
    if m.group(1):
        return labels.get(m.group(1), "")
    return m.group(2) % value if m.group(2) else f"{value:g}"


def render(template: str, labels: Mapping[str, str], value: float, lookup: Lookup | None = None) -> str:
    """Expand the supported template subset (module docstring) as Prometheus would."""
    text = _QUERY.sub(lambda m: _query(m, lookup), template)
    return _TEMPLATE.sub(lambda m: _expand(m, labels, value), text)
