"""The bounds of every ProbeResult field: what a results file row must hold, and the daemon's last gate.

`from_row` reads one JSON object of `sloguard probe --json` (a file a user hands to `evaluate`): every field
is type- and range-checked (JSON has no NaN, a bool is `true`/`false`, a latency is finite seconds under a
week), and a violation raises Invalid naming the field. `checked` is the gate every result passes before the
SLO windows and the store: a value out of range there (a server record joined from elsewhere, a bug) is
cleared and counted in `sloguard_invalid_input_total{source="probe"}`, never stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from sloguard import untrusted
from sloguard.model import ProbeResult
from sloguard.probes.timing import ITL_BUCKETS
from sloguard.untrusted import Invalid

MAX_FIELD_TEXT = 4096  # an error message, probe name or trace id in a results file
MAX_NS = 2**62  # perf_counter_ns values


def _text(v: object, what: str) -> str:
    if not isinstance(v, str):
        raise Invalid("not_a_string", what)
    if len(v) > MAX_FIELD_TEXT:
        raise Invalid("too_long", what)
    return v


def _bool(v: object, what: str) -> bool:
    if not isinstance(v, bool):  # "false" is a string, 0 a number: neither is a verdict
        raise Invalid("not_a_boolean", what)
    return v


def _status(v: object, what: str) -> int:
    return untrusted.count(v, hi=999, what=what)


def _counts(v: object, what: str) -> tuple[int, ...]:
    if not isinstance(v, list | tuple):
        raise Invalid("not_a_list", what)
    untrusted.bounded(v, limit=len(ITL_BUCKETS) + 1, what=what)
    return tuple(untrusted.tokens(x, what=what) for x in v)


Check = Callable[[object, str], Any]
_SECONDS: Check = lambda v, what: untrusted.seconds(v, what=what)  # noqa: E731
_KINDS: dict[str, Check] = {
    "float | None": _SECONDS, "int | None": lambda v, what: untrusted.tokens(v, what=what),
    "str | None": _text, "str": _text, "bool": _bool,
}
# Fields whose kind is not read from the annotation alone.
_SPECIAL: dict[str, Check] = {
    "ts": lambda v, what: untrusted.timestamp(v, what=what), "status_code": _status, "itl_counts": _counts,
    "itl_sum_s": _SECONDS, "t0_ns": lambda v, what: untrusted.count(v, hi=MAX_NS, what=what),
}
FIELDS: dict[str, tuple[Check, bool]] = {  # name -> (check, None allowed)
    f.name: (_SPECIAL.get(f.name) or _KINDS[str(f.type)], str(f.type).endswith("| None"))
    for f in dataclasses.fields(ProbeResult)
}
REQUIRED = tuple(f.name for f in dataclasses.fields(ProbeResult) if f.default is dataclasses.MISSING)


def field(name: str, value: object) -> Any:
    """Return one field's value checked against its bounds, or raise Invalid naming the field."""
    check, nullable = FIELDS[name]
    if value is None:
        if nullable:
            return None
        raise Invalid("missing", name)
    return check(value, name)


def from_row(row: object) -> ProbeResult:
    """Return the result one JSON object describes (unknown keys ignored); Invalid names the first bad field."""
    if not isinstance(row, Mapping):
        raise Invalid("not_an_object", "line")
    missing = [name for name in REQUIRED if name not in row]
    if missing:
        raise Invalid("missing", ", ".join(missing))
    return ProbeResult(**{k: field(k, v) for k, v in row.items() if k in FIELDS})


def checked(r: ProbeResult, source: str = "probe") -> ProbeResult | None:
    """Return `r` with every out-of-range optional value cleared (each counted), or None (counted) when a
    required one is invalid; a result from this process's own probes passes unchanged."""
    bad: dict[str, Any] = {}
    for f in dataclasses.fields(r):
        value = getattr(r, f.name)
        try:
            field(f.name, value)
        except Invalid as exc:
            untrusted.reject(source, exc.reason, str(exc))
            if f.name in REQUIRED:
                return None
            bad[f.name] = f.default
    return dataclasses.replace(r, **bad) if bad else r
