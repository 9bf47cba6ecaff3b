"""Human-readable SLO status from the `/api/v1/slos` document: the demo's lines, `evaluate`'s table, the landing page.

Pure functions over plain JSON (tolerant of missing keys: null or absent is "no data", never 0). Every ratio
is printed as a percentage and every duration with its unit, e.g. `goodput 70.0% (target 95.0%)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sloguard.config.burnwindows import STANDARD_WINDOWS
from sloguard.config.units import format_duration, parse_duration

OK, BREACH, NO_DATA = "OK", "BREACH", "no data"
Doc = Mapping[str, Any]


@dataclass(frozen=True)
class Cell:
    """One value as shown, with its verdict (OK, BREACH, no data, or "" where there is none)."""

    text: str
    state: str = ""


@dataclass(frozen=True)
class SLOTable:
    """One SLO: a row per check, a column per window, plus free-text notes (budget left, stages)."""

    name: str
    title: str
    state: str
    windows: tuple[str, ...]
    rows: tuple[tuple[str, tuple[Cell, ...]], ...]
    notes: tuple[str, ...]


def seconds(v: Any) -> str:
    """Format a measured duration: `812ms`, `0.42ms`, `12.3s`; None is `no data`."""
    if not isinstance(v, int | float):
        return NO_DATA
    if v < 0.01:
        return f"{v * 1000:.2f}ms"
    return f"{v * 1000:.0f}ms" if v < 10 else f"{v:.1f}s"


def percent(v: Any) -> str:
    """Format a ratio as a percentage: 0.7 -> `70.0%`; None is `no data`."""
    return f"{v:.1%}" if isinstance(v, int | float) else NO_DATA


def threshold(v: Any) -> str:
    """Format a configured duration exactly as a config would write it (`50ms`, `1s`)."""
    return format_duration(float(v)) if isinstance(v, int | float) else "?"


def _rows_at(items: Sequence[Doc], window: str) -> list[Doc]:
    return [i for i in items if i.get("window") == window and not i.get("segment")]


def _verdict(ok: Any) -> str:
    return NO_DATA if ok is None else (OK if ok else BREACH)


def _goodput_state(ratio: Any, target: Any) -> str:
    if not isinstance(ratio, int | float) or not isinstance(target, int | float):
        return NO_DATA
    return OK if ratio >= target else BREACH


def slo_lines(slo: Doc, window: str = "5m") -> list[str]:
    """Return a few terminal lines for one SLO over one window (the demo's live status)."""
    lines = [f"SLO {slo.get('name')} ({slo.get('source')}, target {slo.get('target')}), {window} window:"]
    lines += [_objective_line(o) for o in _rows_at(slo.get("objectives") or [], window)]
    target = slo.get("goodput_target")
    for w in _rows_at(slo.get("windows") or [], window):
        if w.get("goodput_ratio") is not None:
            lines.append(f"  {_goodput_state(w['goodput_ratio'], target):8} goodput {percent(w['goodput_ratio'])} "
                         f"(target {percent(target)}), {w.get('requests') or 0:.0f} requests")
    return lines + [f"  {note}" for note in _notes(slo, window)]


# The event a censored request never reached, by metric (docs/definitions.md: censored latencies).
_EVENT = {"ttft": "the first token", "ttfot": "the first output token", "e2e": "the end", "tpot": "the end",
          "itl": "the end", "decode": "the end"}


def _value(o: Doc) -> str:
    """Format an objective's quantile; a lower bound (requests cut short could raise it) reads `≥ 1900ms`."""
    return ("≥ " if o.get("censored_count") and o.get("upper") != o.get("value") else "") + seconds(o.get("value"))


def _objective_line(o: Doc) -> str:
    line = (f"  {_verdict(o.get('compliant')):8} p{o.get('percentile', 0):g} {o.get('metric'):5} "
            f"{_value(o):>8}  (objective {threshold(o.get('threshold'))})")
    if o.get("censored_count"):  # held or missed, say how many were cut short (sloguard.windows.censor)
        line += (f": {o.get('censored_count')} of {o.get('count')} ended before "
                 f"{_EVENT.get(str(o.get('metric')), 'the event')}")
    return line


def _span(seconds_: float) -> str:
    if seconds_ >= 3600:
        return f"{seconds_ / 3600:.1f}h"
    return f"{seconds_ / 60:.0f}m" if seconds_ >= 60 else f"{seconds_:.0f}s"


def budget_line(b: Doc, window: str) -> str:
    """Say what pages and why: budget left over the SLO window, its data coverage, the fastest row's state."""
    name = str(b.get("sli", "")) + (f" ({b['metric']} p{b['percentile']})" if b.get("metric") else "")
    left = NO_DATA if b.get("remaining") is None else f"{percent(b['remaining'])} of the {window} budget left"
    covered = f"{_span(float(b.get('covered') or 0.0))} of data"
    rows = [r for r in b.get("rows") or [] if r.get("meaning") != "never"]
    row = next((r for r in rows if r.get("fires")), next((r for r in rows if r.get("severity") == "page"), None))
    if row is None:
        return f"{name} budget: {left} ({covered}); no burn alert can fire"
    state = "PAGING" if row.get("fires") and row["severity"] == "page" else ("TICKET" if row.get("fires") else "quiet")
    return (f"{name} budget: {left} ({covered}); {state}: burning {row.get('burn_long') or 0:.3g}x over "
            f"{row['long_window']} ({row['severity']} at {row['factor']:g}x over {row['long_window']} and "
            f"{row['short_window']}, with >= {row.get('min_bad') or 0:.0f} bad: {row.get('bad_long') or 0:.0f})")


def _notes(slo: Doc, window: str) -> list[str]:
    notes = []
    for s in _rows_at(slo.get("stages") or [], window):
        if s.get("budget") is not None and s.get("p95") is not None:
            notes.append(f"stage {s['stage']:8} p95 {seconds(s['p95']):>8} of budget {threshold(s['budget'])}"
                         + (" (bounded)" if s.get("bounded") else ""))
    budgets = slo.get("error_budgets") or []
    notes += [budget_line(b, str(slo.get("window"))) for b in budgets]
    budget = slo.get("error_budget_remaining")
    if not budgets and budget is not None:
        notes.append(f"error budget remaining ({slo.get('window')}): {percent(budget)}")
    worst = worst_stage(slo, window)
    if worst:
        notes.append(f"most over budget over {window}: {worst}")
    return notes + diagnosis_lines(slo)


def worst_stage(slo: Doc, window: str) -> str | None:
    """Return the stage most over its p95 budget over this window (not over any other), or None."""
    over = [s for s in _rows_at(slo.get("stages") or [], window) if (s.get("overrun") or 0.0) > 1.0]
    return str(max(over, key=lambda s: s["overrun"])["stage"]) if over else None


def diagnosis_lines(slo: Doc) -> list[str]:
    """Return the bottleneck verdict line (docs/diagnosis.md), or nothing while healthy or unavailable."""
    d = slo.get("diagnosis")
    if not isinstance(d, dict) or not d.get("summary"):
        return []
    conf = d.get("confidence")
    tail = f" (confidence {percent(conf)})" if isinstance(conf, int | float) and d.get("cause") != "unknown" else ""
    return [f"diagnosis: {d['summary']}{tail}"]


def render_status(api: Any, window: str = "5m") -> str:
    """Render `/api/v1/slos` as a few terminal lines per SLO (one window, all prompt buckets)."""
    slos = api.get("slos", []) if isinstance(api, Mapping) else []
    lines = [line for slo in slos if isinstance(slo, Mapping) for line in slo_lines(slo, window)]
    return "\n".join(lines) or "(waiting for the first evaluation)"


def _window_seconds(w: str) -> float:
    try:
        return parse_duration(w)
    except ValueError:
        return float("inf")


def slo_windows(slo: Doc) -> tuple[str, ...]:
    """Return the SLO's reporting windows present in the document, shortest first.

    The standard windows and the SLO's own; the short windows that only burn-rate rows read (1m, 10m) are left
    out, so a table's state is never judged on a minute of probes.
    """
    found = {str(i["window"]) for key in ("objectives", "windows") for i in slo.get(key) or []
             if i.get("window") and not i.get("segment")}
    shown = {w for w in found if _window_seconds(w) in STANDARD_WINDOWS or w == slo.get("window")}
    return tuple(sorted(shown or found, key=_window_seconds))


def _objective_rows(slo: Doc, windows: Sequence[str]) -> list[tuple[str, tuple[Cell, ...]]]:
    by_key: dict[tuple[str, float, float], dict[str, Doc]] = {}
    for o in slo.get("objectives") or []:
        if not o.get("segment"):
            key = (str(o.get("metric")), float(o.get("percentile") or 0), float(o.get("threshold") or 0))
            by_key.setdefault(key, {})[str(o.get("window"))] = o
    rows = []
    for (metric, pct, limit), at in by_key.items():
        cells = tuple(Cell(_value(at[w]), _verdict(at[w].get("compliant"))) if w in at
                      else Cell("-") for w in windows)
        rows.append((f"p{pct:g} {metric} <= {threshold(limit)}", cells))
    return rows


def _window_rows(slo: Doc, windows: Sequence[str]) -> list[tuple[str, tuple[Cell, ...]]]:
    at = {str(w.get("window")): w for w in slo.get("windows") or [] if not w.get("segment")}
    target = slo.get("goodput_target")

    def cells(fn: Any) -> tuple[Cell, ...]:
        return tuple(fn(at[w]) if w in at else Cell("-") for w in windows)

    rows = []
    if target is not None:
        rows.append((f"goodput >= {percent(target)}", cells(
            lambda w: Cell(percent(w.get("goodput_ratio")), _goodput_state(w.get("goodput_ratio"), target)))))
    rows.append(("requests", cells(lambda w: Cell(f"{w.get('requests') or 0:.0f}"))))
    burns: dict[tuple[str, str], float] = {}
    for b in slo.get("burns") or []:  # per SLI: its fastest budget's burn in each window
        if isinstance(b.get("burn_rate"), int | float):
            key = (str(b.get("sli")), str(b.get("window")))
            burns[key] = max(burns.get(key, 0.0), float(b["burn_rate"]))
    for sli in dict.fromkeys(str(b.get("sli")) for b in slo.get("burns") or []):
        rows.append((f"{sli} burn", tuple(Cell(f"{burns[(sli, w)]:.3g}x") if (sli, w) in burns else Cell(NO_DATA)
                                          for w in windows)))
    return rows


def overall(cells: Sequence[Cell]) -> str:
    """Return BREACH if any cell breaches, OK if any holds, else no data."""
    states = {c.state for c in cells}
    return BREACH if BREACH in states else (OK if OK in states else NO_DATA)


def slo_table(slo: Doc, windows: Sequence[str] | None = None) -> SLOTable:
    """Return one SLO as a table; its state is judged on the shortest window shown."""
    cols = tuple(windows) if windows is not None else slo_windows(slo)
    rows = tuple(_objective_rows(slo, cols) + _window_rows(slo, cols))
    first = [cells[0] for _, cells in rows if cells]
    title = f"SLO {slo.get('name')} ({slo.get('source')}, target {slo.get('target')})"
    return SLOTable(str(slo.get("name")), title, overall(first), cols, rows,
                    tuple(_notes(slo, cols[0]) if cols else ()))


def _cell_text(c: Cell) -> str:
    return f"{c.text} {c.state}" if c.state and c.state != NO_DATA else c.text


def render_table(t: SLOTable) -> str:
    """Render one SLO table as aligned text: a header, a row per check, then the notes."""
    grid = [["CHECK", *t.windows]] + [[label, *(_cell_text(c) for c in cells)] for label, cells in t.rows]
    widths = [max(len(r[i]) for r in grid) for i in range(len(grid[0]))]
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in grid]
    return "\n".join([f"{t.title}: {t.state}", *body, *t.notes])


def render_tables(api: Any) -> str:
    """Render every SLO of `/api/v1/slos` (or `sloguard evaluate --json`) as text tables."""
    slos = api.get("slos", []) if isinstance(api, Mapping) else []
    return "\n\n".join(render_table(slo_table(s)) for s in slos if isinstance(s, Mapping)) or "(no SLOs)"
