"""The one boundary for peer data: range-checked numbers, bounded strings and collections, counted rejections.

Everything a peer sends (SSE, /metrics, /v1/models, version endpoints, OTLP spans, discovery answers) and every
file a user hands us passes these checks before it becomes a value type. A violation raises `Invalid` for that
one record; the caller drops the record and calls `reject(source, reason)`: counted in
`sloguard_invalid_input_total{source,reason}` and logged once per (source, reason). Never raised into a loop.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Sized
from typing import Any

from prometheus_client.metrics_core import Metric

from sloguard.families import declare

log = logging.getLogger("sloguard.untrusted")

MAX_COUNT = 2**53  # tokens, bytes, requests: the largest integer a float64 (and SQLite REAL) holds exactly
MAX_SECONDS = 7 * 86400.0  # no single request, stage or span lasts a week
MAX_TEXT = 256  # a model name, engine version or label value as shown to a person
MAX_TOKENS = 100_000_000  # tokens of one request: 10x the longest context window any engine serves
MAX_TIMESTAMP = 2.0**33  # Unix seconds: year 2242; a later "now" is a broken clock or a forged value
# control, format (bidi overrides), line/paragraph separators (U+2028/9), lone surrogates (SQLite cannot store them)
_CONTROL = {"Cc", "Cf", "Zl", "Zp", "Cs"}
Forward = Callable[[str, str, str, int], None]


class Invalid(ValueError):
    """One peer value out of bounds; `reason` is a short stable label for the counter, `what` names the field.

    str() is `what: problem` (e.g. `e2e_s: out of range (not in [0, 604800])`), never the value itself.
    """

    def __init__(self, reason: str, what: str = "", bound: str = "") -> None:
        problem = reason.replace("_", " ") + (f" ({bound})" if bound else "")
        super().__init__(f"{what}: {problem}" if what else problem)
        self.reason, self.what = reason, what


def number(v: object, *, lo: float = 0.0, hi: float = math.inf, what: str = "value") -> float:
    """Return `v` as a finite float in [lo, hi], or raise Invalid (bools, NaN, ±inf and strings are invalid)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise Invalid("not_a_number", what)
    try:
        f = float(v)
    except OverflowError:  # an int beyond float range (a 400-digit JSON integer)
        raise Invalid("out_of_range", what, f"not in [{lo:.15g}, {hi:.15g}]") from None
    if not math.isfinite(f):
        raise Invalid("not_finite", what)
    if not lo <= f <= hi:
        raise Invalid("out_of_range", what, f"not in [{lo:.15g}, {hi:.15g}]")
    return f


def count(v: object, *, hi: int = MAX_COUNT, what: str = "count") -> int:
    """Return `v` as an integer in [0, hi] (an integral float is accepted), or raise Invalid."""
    f = number(v, lo=0, hi=hi, what=what)
    if f != int(f):
        raise Invalid("not_an_integer", what)
    return int(f)


def seconds(v: object, *, hi: float = MAX_SECONDS, what: str = "seconds") -> float:
    """Return a duration in seconds in [0, hi], or raise Invalid."""
    return number(v, lo=0.0, hi=hi, what=what)


def tokens(v: object, *, what: str = "tokens") -> int:
    """Return a per-request token count in [0, MAX_TOKENS], or raise Invalid."""
    return count(v, hi=MAX_TOKENS, what=what)


def timestamp(v: object, *, what: str = "ts") -> float:
    """Return a Unix time in [0, MAX_TIMESTAMP) seconds, or raise Invalid."""
    return number(v, lo=0.0, hi=MAX_TIMESTAMP, what=what)


def optional(check: Callable[..., Any], v: object, **kw: Any) -> Any:
    """Return None for None, else `check(v, **kw)` (fields a peer may leave out)."""
    return None if v is None else check(v, **kw)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def json_doc(data: bytes | str, *, what: str = "answer") -> Any:
    """Parse one JSON document; NaN/Infinity, invalid UTF-8 and nesting too deep to parse raise Invalid("not_json")."""
    try:
        return json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise Invalid("not_json", what) from None


def text(v: object, *, limit: int = MAX_TEXT, what: str = "text") -> str:
    """Return a peer string with control, format and separator characters removed, cut to `limit` characters."""
    if not isinstance(v, str):
        raise Invalid("not_a_string", what)
    cleaned = "".join(c for c in v[: limit * 4] if unicodedata.category(c) not in _CONTROL)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def bounded(items: Sized, *, limit: int, what: str = "items") -> None:
    """Raise Invalid when a collection holds more than `limit` items."""
    if len(items) > limit:
        raise Invalid("too_many", what)


class _Rejections:
    """Process-wide rejection counts; thread-safe (scrape parsers run in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()

    def add(self, source: str, reason: str, n: int = 1) -> bool:
        """Count `n` rejections; return True the first time this (source, reason) is seen."""
        with self._lock:
            first = (source, reason) not in self._counts
            self._counts[(source, reason)] += n
        return first

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()


REJECTIONS = _Rejections()
_forward: Forward | None = None


def forward(to: Forward | None) -> None:
    """Send rejections to `to` instead of counting them here (the probe process hands them to the daemon's)."""
    global _forward
    _forward = to


def reject(source: str, reason: str, detail: str = "", n: int = 1) -> None:
    """Count `n` invalid records from one source; log the first of each (source, reason) once."""
    if _forward is not None:
        _forward(source, reason, detail, n)
        return
    if REJECTIONS.add(source, reason, n):
        log.warning("invalid input dropped (counted in sloguard_invalid_input_total from now on)",
                    extra={"source": source, "reason": reason, "detail": text(detail, limit=120) if detail else ""})


INVALID_INPUT = declare("sloguard_invalid_input", "counter", "Peer or file records dropped as invalid (out of range, "
                        "not finite, too long, too many), by source and reason.", ("source", "reason"))


def families() -> list[Metric]:
    """Return sloguard_invalid_input_total{source,reason}."""
    fam = INVALID_INPUT.counter()
    for (source, reason), n in sorted(REJECTIONS.snapshot().items()):
        fam.add_metric([source, reason], n)
    return [fam]
