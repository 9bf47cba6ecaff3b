"""Fix hints for config errors: "did you mean" for a mistyped key, the number for `percentile: p95`, the ratio for
`target: 95`."""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from sloguard.config.files import shown

_P_STYLE = re.compile(r"^\s*[pP](\d+(?:\.\d+)?)\s*$")


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """Return the pydantic models an annotation can hold (through Optional, list, dict, unions, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in models_in(arg)]


def _keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _tag(model: type[BaseModel]) -> set[str]:
    field = model.model_fields.get("type")
    return set(typing.get_args(field.annotation)) if field is not None else set()


def _step(models: list[type[BaseModel]], part: int | str) -> list[type[BaseModel]]:
    if isinstance(part, int):
        return models  # a list index: the item has the list's model
    tagged = [m for m in models if part in _tag(m)]
    if tagged:  # a discriminator tag pydantic puts into the location (notifiers[0].slack.token)
        return tagged
    out: list[type[BaseModel]] = []
    for model in models:
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is not None:
            out += models_in(field.annotation)
    return out


def known_keys(root: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """Return the keys allowed next to the last element of a pydantic error location."""
    models = [root]
    for part in loc[:-1]:
        models = _step(models, part)
    return sorted({k for m in models for k in _keys(m)})


def did_you_mean(root: type[BaseModel], loc: Sequence[int | str]) -> str:
    """Return `; did you mean 'x'?` for a mistyped key, or "" when nothing is close."""
    if not loc or not isinstance(loc[-1], str):
        return ""
    close = difflib.get_close_matches(loc[-1], known_keys(root, loc), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def ratio_hint(err: Any) -> str | None:
    """Return a message for a ratio (bounded by 1) written as a percentage (`target: 95`), else None."""
    kind, ctx, value = err.get("type"), err.get("ctx") or {}, err.get("input")
    bound = ctx.get("lt") if kind == "less_than" else ctx.get("le") if kind == "less_than_equal" else None
    if bound != 1 or isinstance(value, bool) or not isinstance(value, int | float) or value <= 1:
        return None
    op = "<" if kind == "less_than" else "<="
    if 1 < value <= 100:
        return f"must be {op} 1 (a ratio, not a percentage): did you mean {value / 100:g}?"
    return f"must be {op} 1 (a ratio, e.g. 0.99)"


def number_hint(err: Any) -> str | None:
    """Return a message for `percentile: p95` (a p-style string where a number goes), else None."""
    value = err.get("input")
    if err.get("type") in ("float_parsing", "int_parsing") and isinstance(value, str):
        m = _P_STYLE.match(value)
        if m:
            return f"write the number without 'p': {m.group(1)}, not {shown(value)}"
        return f"must be a number, got {shown(value)}"
    return None

