"""Durations in the Prometheus style (`250ms`, `5m`, `1h30m`, `28d`), parsed to float seconds."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

from sloguard.config.files import shown

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
DURATION_PATTERN = r"^((\d+(\.\d+)?)(ms|s|m|h|d|w|y))+$"


def parse_duration(text: str) -> float:
    """Return the seconds in a duration string; raise ValueError naming the bad text."""
    s = text.strip()
    pos, total = 0, 0.0
    if not s:
        raise ValueError("empty duration")
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(
                f"invalid duration {shown(text)}: use a number and a unit (ms, s, m, h, d, w, y), e.g. '250ms' or '5m'")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total


def format_duration(seconds: float) -> str:
    """Return the shortest exact duration string for seconds (inverse of parse_duration)."""
    if seconds <= 0:
        return "0s"
    ms = round(seconds * 1000)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _coerce(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a duration must be a string like '250ms' or '5m'")
    if isinstance(value, int | float):
        raise ValueError(f"ambiguous bare number {shown(value)}: write a unit, e.g. '{shown(value)}s' or "
                         f"'{shown(value)}ms'")
    if isinstance(value, str):
        return parse_duration(value)
    raise ValueError("a duration must be a string like '250ms' or '5m'")


Duration = Annotated[
    float,
    BeforeValidator(_coerce),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN, "examples": ["250ms", "5m", "28d"]}),
]
