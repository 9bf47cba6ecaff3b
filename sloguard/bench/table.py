"""The terminal summary: one row per stage and the max-load verdict (pure text from result rows)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

HEAD = ("STAGE", "LOAD", "REQS", "RPS", "OUT_TOK/S", "TTFT_MS p50/95/99", "TPOT_MS p50/95/99", "ITL_MS p50/95/99",
        "E2E_MS p50/95/99", "GOODPUT", "ERRORS", "LAG_P99_MS", "SLO")


def _ms(q: Mapping[str, Any]) -> str:
    vals = [q.get(k) for k in ("p50", "p95", "p99")]
    return "/".join("-" if v is None else f"{v * 1e3:.0f}" if v >= 0.1 else f"{v * 1e3:.1f}" for v in vals)


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def load_text(kind: str, load: float) -> str:
    """Return a load as text: `c=16` or `4.5/s`."""
    return f"c={load:g}" if kind == "concurrency" else f"{load:g}/s"


def row(stage: Mapping[str, Any]) -> list[str]:
    """Return the table cells of one stage summary row."""
    lat = stage["latency"]
    goodput = stage["goodput"]
    gp = "/".join(_num(g["ratio"], ".3f") for g in goodput.values()) or "-"
    slo = stage["slo"]["verdict"] if stage["slo"]["criteria"] else "-"
    status = "" if stage["status"] == "complete" else f" ({stage['status']})"
    return [f"{stage['stage']}{'.' + str(stage['attempt']) if stage['attempt'] else ''}",
            load_text(stage["load_kind"], stage["load"]), str(stage["requests"]), _num(stage["rps"], ".2f"),
            _num(stage["output_tok_s"], ".0f"), _ms(lat["ttft"]), _ms(lat["tpot"]), _ms(lat["itl"]), _ms(lat["e2e"]),
            gp, f"{stage['failed']}" + (f" ({stage['error_ratio']:.0%})" if stage["failed"] else ""),
            _num(None if stage["send_lag"]["p99"] is None else stage["send_lag"]["p99"] * 1e3, ".2f"), slo + status]


def table(stages: Sequence[Mapping[str, Any]]) -> str:
    """Return the aligned summary table of every stage."""
    rows = [list(HEAD)] + [row(s) for s in stages]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def verdict(search: Mapping[str, Any]) -> str:
    """Return the one-line max-load verdict of a search result row."""
    kind = search["kind"]
    unit = "" if kind == "concurrency" else " req/s"
    what = "max concurrency at SLO" if kind == "concurrency" else "max rate at SLO"
    low, high = search["low"], search["high"]
    interval = f"[{'?' if low is None else f'{low:g}'}, {'?' if high is None else f'{high:g}'}]"
    if search["max_load"] is None:
        first = search["first_break"]
        return f"{what}: none: the SLO broke at the lowest load tried ({load_text(kind, first)}; " \
               f"{search['breaks_first']} breaks first)" if first is not None else f"{what}: not measured"
    headline = search["max_load"] if kind == "concurrency" else search["estimate"]
    text = f"{what}: {headline:.3g}{unit} {interval}"
    if search["first_break"] is None:
        return text + f" (the SLO held at every load tried, up to {search['max_load']:g}{unit})"
    return text + f"; beyond it {search['breaks_first']} breaks first"
