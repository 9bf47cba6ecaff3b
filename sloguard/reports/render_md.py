"""Markdown for a pull-request comment: headings, tables and lists only (no HTML)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sloguard.escape import markdown, markdown_text
from sloguard.reports import text
from sloguard.reports.text import seconds

NO_LOADS = "not available: not a bench run with load levels"
# Environment rows whose values a server or an input file states verbatim: shown as inline code.
PEER_ROWS = frozenset({"source", "target", "engine", "engine version", "model", "labels", "GPU / driver", "sloguard",
                       "config sha256"})


def _cell(x: object) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _prose(x: object) -> str:
    return markdown_text(str(x))


def _peer(x: object) -> str:
    """Return a value that came from a server or an input file as inline code (sloguard.escape.markdown)."""
    return "—" if x in (None, "", "—") else markdown(str(x))


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """Return a Markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(x) for x in row) + " |" for row in rows]
    return out


def environment_rows(doc: dict[str, Any]) -> list[list[object]]:
    """Return the environment table's rows (shared with HTML)."""
    b, c = doc["baseline"], doc["candidate"]

    def both(get: Any) -> list[object]:
        return [get(b) or "—", get(c) or "—"]

    def labels(s: dict[str, Any]) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted((s["identity"].get("labels") or {}).items()))

    def gpu(s: dict[str, Any]) -> str:
        g = s["environment"].get("gpu")
        return ", ".join(f"{k} {v}" for k, v in g.items() if not isinstance(v, dict | list)) if isinstance(g, dict) \
            else str(g or "")

    return [
        ["source", *both(lambda s: f"{s['kind']}: {s['spec']}")],
        ["target", *both(lambda s: s["identity"].get("target"))],
        ["engine", *both(lambda s: s["identity"].get("engine"))],
        ["engine version", *both(lambda s: s["identity"].get("engine_version"))],
        ["model", *both(lambda s: s["identity"].get("model"))],
        ["labels", *both(labels)],
        ["GPU / driver", *both(gpu)],
        ["sloguard", *both(lambda s: s["environment"].get("sloguard_version"))],
        ["config sha256", *both(lambda s: (s["environment"].get("config_sha256") or "")[:12])],
        ["requests (successes)", *both(lambda s: f"{s['requests']} ({s['successes']})")],
        ["excluded", *both(lambda s: ", ".join(f"{k}: {v}" for k, v in s["excluded"].items()))],
        ["time range (UTC)", *both(lambda s: " … ".join(t or "?" for t in s["time_range"]))],
    ]


def cell_rows(cells: Iterable[dict[str, Any]]) -> list[list[object]]:
    """Return change-table rows: what, baseline, candidate, change [95 % CI], verdict (why)."""
    rows = []
    for c in cells:
        verdict = c["verdict"] + (f" ({c['reason']})" if c["reason"] and c["verdict"] == "not enough data" else "")
        if not c["family"]:
            verdict = "shown, not judged"
        rows.append([text.what(c), text.value(c, "baseline"), text.value(c, "candidate"), text.change(c), verdict])
    return rows


def scopes(doc: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Return the change tables: overall first, then each bucket and load level."""
    order: dict[str, list[dict[str, Any]]] = {}
    for c in doc["cells"]:
        if c["kind"] != "stage":
            order.setdefault(c["scope"], []).append(c)
    return [(s, order[s]) for s in sorted(order, key=lambda s: (s != "overall", s))]


def objective_rows(doc: dict[str, Any]) -> list[list[object]]:
    """Return metrics-vs-objectives rows."""
    def show(side: dict[str, Any]) -> str:
        if side["value"] is None:
            return "> timeout (censored)" if side["censored"] else "—"
        return f"{seconds(side['value'])} {'✓' if side['met'] else '✗'}"

    return [[o["slo"], o["what"], f"≤ {seconds(o['threshold'])}", show(o["baseline"]), show(o["candidate"])]
            for o in doc["objectives"]]


def render(doc: dict[str, Any]) -> str:
    """Return the report as Markdown."""
    b, c = _peer(text.label(doc["baseline"])), _peer(text.label(doc["candidate"]))
    out = [f"# sloguard regression report: {b} → {c}", "", f"**{markdown_text(text.summary(doc))}**", ""]
    for w in doc["warnings"]:
        out.append(f"- ⚠ {markdown_text(str(w))}")
    env = [[name, *map(_peer if name in PEER_ROWS else _prose, values)] for name, *values in environment_rows(doc)]
    out += ["", "## Environment", "", *table(["", "baseline", "candidate"], env)]
    if doc["objectives"]:
        out += ["", "## Metrics vs objectives", "",
                *table(["SLO", "objective", "threshold", "baseline", "candidate"], objective_rows(doc))]
    for name, cells in scopes(doc):
        title = "Changes" if name == "overall" else f"Changes: {markdown_text(text.scope(cells[0]))}"
        rows = [[markdown_text(str(row[0])), *row[1:]] for row in cell_rows(cells)]  # bucket names come from files
        out += ["", f"## {title}", "", *table(["metric", "baseline", "candidate", "change [95 % CI]", "verdict"], rows)]
    out += ["", "## Distributions", "", *_distributions(doc)]
    out += ["", "## Stage breakdown", "", *_stages(doc)]
    out += ["", "## Load scenarios and breaking point", "", *_loads(doc)]
    out += ["", "## Bottlenecks and recommendations", "", *_bottlenecks(doc)]
    out += ["", "## Methodology", "", *[f"- {m}" for m in text.methodology(doc)], ""]
    return "\n".join(out)


def _distributions(doc: dict[str, Any]) -> list[str]:
    rows = []
    for metric, pair in doc["distributions"].items():
        for role in ("baseline", "candidate"):
            pts = pair.get(role) or []
            rows.append([text.NAMES.get(metric, metric), role,
                         *[seconds(_at(pts, q)) for q in (0.5, 0.9, 0.95, 0.99)]])
    if not rows:
        return ["not available: no per-request data (Prometheus input: see the change tables' bucket resolution)"]
    return [*table(["metric", "side", "p50", "p90", "p95", "p99"], rows), "",
            "The HTML report overlays both cumulative distributions."]


def _at(points: list[list[float]], q: float) -> float | None:
    return next((x for x, share in points if share >= q), None)


def _stages(doc: dict[str, Any]) -> list[str]:
    stage_cells = {c["metric"].split(":", 1)[1] + c["stat"]: c for c in doc["cells"] if c["kind"] == "stage"}
    rows = []
    for stage, row in doc["stages"].items():
        b, c = row.get("baseline") or {}, row.get("candidate") or {}
        delta = stage_cells.get(stage + "p50")
        rows.append([stage, seconds(b.get("p50")), seconds(b.get("p95")), seconds(c.get("p50")),
                     seconds(c.get("p95")), text.change(delta) if delta else "—"])
    if not rows:
        return ["not available: no per-request stage times in these inputs"]
    return table(["stage", "baseline p50", "baseline p95", "candidate p50", "candidate p95", "p50 change [95 % CI]"],
                 rows)


LOAD_HEADER = ("load", "p95 TTFT base", "p95 TTFT cand", "p95 E2E base", "p95 E2E cand", "rps base", "rps cand")


def load_rows(doc: dict[str, Any]) -> tuple[list[list[object]], list[str]]:
    """Return the load table's rows and the max-load lines (shared with HTML)."""
    rows: list[list[object]] = []
    for ld in doc["loads"]:
        b, c = ld.get("baseline") or {}, ld.get("candidate") or {}
        rows.append([ld["label"], seconds(b.get("ttft_95")), seconds(c.get("ttft_95")), seconds(b.get("e2e_95")),
                     seconds(c.get("e2e_95")), _rps(b), _rps(c)])
    tail = []
    ml = doc["max_load"]
    if ml:
        shift = ml["shift"]
        tail.append(f"Max load at SLO: baseline {_ml(ml['baseline'])}, candidate {_ml(ml['candidate'])}"
                    + (f" ({shift * 100:+.1f} %)" if shift is not None else ""))
    return rows, tail


def _loads(doc: dict[str, Any]) -> list[str]:
    if not doc["loads"]:
        return [NO_LOADS]
    rows, tail = load_rows(doc)
    return [*table(LOAD_HEADER, [[markdown_text(str(r[0])), *r[1:]] for r in rows]),
            *(["", *map(markdown_text, tail)] if tail else [])]


def _rps(side: dict[str, Any]) -> str:
    return "—" if side.get("rps") is None else f"{side['rps']:.2f}"


def _ml(m: dict[str, Any]) -> str:
    lo, hi = (m.get("interval") or [None, None])[:2]
    return f"{m.get('value')} {m.get('kind')} [{lo}, {hi}] ({m.get('reason')})"


def _bottlenecks(doc: dict[str, Any]) -> list[str]:
    bn = doc["bottlenecks"]
    if not bn.get("available"):
        return [f"not available: {markdown_text(str(bn.get('reason')))}"]
    return [f"- {markdown_text(str(v))}" for v in bn.get("items", [])]
