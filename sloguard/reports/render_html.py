"""One self-contained HTML file: inline CSS and SVG, no scripts, no fetches (a CSP forbids them), phone-readable."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sloguard.escape import html as escape  # html.escape that also shows control characters
from sloguard.reports import svg, text
from sloguard.reports.render_md import (
    LOAD_HEADER,
    NO_LOADS,
    cell_rows,
    environment_rows,
    load_rows,
    objective_rows,
    scopes,
)

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#222;
background:#fff}
main{max-width:980px;margin:0 auto;padding:12px 14px 40px}
h1{font-size:1.35em;margin:.4em 0}h2{font-size:1.12em;margin:1.6em 0 .5em;border-bottom:1px solid #ddd}
.verdict{padding:10px 12px;border-radius:6px;font-weight:600;background:#eef2f7}
.v-regression{background:#fbe3e0;color:#8b1c10}.v-improvement{background:#e3f4e8;color:#1d5e36}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;font-size:.9em;min-width:100%}th,td{padding:4px 8px;border-bottom:1px solid #eee;
text-align:left;vertical-align:top}th{background:#f6f6f6}
td.regression{color:#b0281a;font-weight:600}td.improvement{color:#1d7a45;font-weight:600}
svg.plot{width:100%;height:auto;max-width:720px;display:block;margin:8px 0}
.warn{color:#8a5a00}ul{padding-left:1.2em}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _table(header: Sequence[str], rows: Iterable[Sequence[object]], verdict_col: int | None = None) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, x in enumerate(row):
            cls = f' class="{escape(str(x).split(" (")[0])}"' if i == verdict_col else ""
            cells.append(f"<td{cls}>{escape(str(x))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _cdfs(doc: dict[str, Any]) -> str:
    out = []
    for metric, pair in doc["distributions"].items():
        name = text.NAMES.get(metric, metric)
        series = [(role, [(x, y) for x, y in pts]) for role, pts in pair.items() if pts]
        out.append(svg.lines(f"{name}: cumulative distribution", series, name, "share of requests ≤", y_unit="%",
                             step=True))
    return "".join(out) or "<p>not available: no per-request data</p>"


def _forest(doc: dict[str, Any]) -> str:
    rows = [(text.what(c), c["delta"], c["ci"][0], c["ci"][1], c["verdict"]) for c in doc["cells"]
            if c["scope"] == "overall" and c["family"] and c["scale"] == "relative" and c["delta"] is not None
            and c["ci"] and None not in c["ci"]]
    threshold = doc["settings"]["thresholds"].get("ttft", 0.05)
    return svg.forest("relative changes with 95 % intervals (band: ± the threshold)", rows, threshold)


def _waterfall(doc: dict[str, Any]) -> str:
    bars = []
    for role in ("baseline", "candidate"):
        parts = [(stage, row[role]["p50"]) for stage, row in doc["stages"].items()
                 if row.get(role) and (row[role]["p50"] or 0) > 0]
        if parts:
            bars.append((role, parts))
    if not bars:
        return "<p>not available: no per-request stage times in these inputs</p>"
    return svg.stacked("median time per stage", bars)


def _load_curves(doc: dict[str, Any]) -> str:
    if len(doc["loads"]) < 2:
        return ""
    out = []
    for metric in ("ttft", "e2e"):
        series = []
        for role in ("baseline", "candidate"):
            pts = [(ld["level"], ld[role][f"{metric}_95"]) for ld in doc["loads"]
                   if ld.get(role) and ld[role].get(f"{metric}_95") is not None]
            if pts:
                series.append((role, pts))
        kind = doc["loads"][0]["kind"]
        out.append(svg.lines(f"p95 {text.NAMES[metric]} vs load", series, "concurrency" if kind == "concurrency"
                             else "requests/s", f"p95 {text.NAMES[metric]}", x_unit="", y_unit="s"))
    return "".join(out)


def render(doc: dict[str, Any]) -> str:
    """Return the report as one HTML document."""
    b, c = text.label(doc["baseline"]), text.label(doc["candidate"])
    parts = [f"<h1>sloguard regression report: {escape(b)} → {escape(c)}</h1>",
             f'<p class="verdict v-{doc["verdict"].replace(" ", "-")}">{escape(text.summary(doc))}</p>']
    if doc["warnings"]:
        parts.append("<ul>" + "".join(f'<li class="warn">⚠ {escape(w)}</li>' for w in doc["warnings"]) + "</ul>")
    parts += ["<h2>Environment</h2>", _table(["", "baseline", "candidate"], environment_rows(doc))]
    if doc["objectives"]:
        parts += ["<h2>Metrics vs objectives</h2>",
                  _table(["SLO", "objective", "threshold", "baseline", "candidate"], objective_rows(doc))]
    parts += ["<h2>Changes</h2>", _forest(doc)]
    for name, cells in scopes(doc):
        if name != "overall":
            parts.append(f"<h3>{escape(text.scope(cells[0]))}</h3>")
        parts.append(_table(["metric", "baseline", "candidate", "change [95 % CI]", "verdict"], cell_rows(cells), 4))
    parts += ["<h2>Distributions</h2>", _cdfs(doc), "<h2>Stage breakdown</h2>", _waterfall(doc),
              "<h2>Load scenarios and breaking point</h2>", _load_curves(doc), _loads_table(doc),
              "<h2>Bottlenecks and recommendations</h2>", _bottlenecks(doc),
              "<h2>Methodology</h2><ul>" + "".join(f"<li>{escape(m)}</li>" for m in text.methodology(doc)) + "</ul>"]
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>sloguard report {escape(b)} → {escape(c)}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")


def _loads_table(doc: dict[str, Any]) -> str:
    if not doc["loads"]:
        return f"<p>{escape(NO_LOADS)}</p>"
    rows, tail = load_rows(doc)
    return _table(LOAD_HEADER, rows) + "".join(f"<p>{escape(t)}</p>" for t in tail)


def _bottlenecks(doc: dict[str, Any]) -> str:
    bn = doc["bottlenecks"]
    if not bn.get("available"):
        return f"<p>not available: {escape(str(bn.get('reason')))}</p>"
    return "<ul>" + "".join(f"<li>{escape(str(v))}</li>" for v in bn.get("items", [])) + "</ul>"
