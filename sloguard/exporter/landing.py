"""The exporter's landing page `/`: a status page for 3 a.m., then targets, alerts, recent probes, links.

First one line per SLO (state, severity, burn, budget left, the verdict with its lever), coloured by severity;
then per SLO its breaches, budgets, stages and incident timeline, all read from the incident model in
`/api/v1/slos` (sloguard.incident), the same values `sloguard status` and notifications show; then the detail
tables per window. Plain HTML and CSS (no JavaScript; a meta refresh every 15 s), readable at 640 px. Every value
is escaped: target names, alert summaries, evidence and probe errors come from configs and remote servers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from sloguard.incident import text as incident_text
from sloguard.model import Sample
from sloguard.slo.status import BREACH, NO_DATA, OK, Cell, SLOTable, seconds, slo_table, slo_windows

LANDING_WINDOWS = ("5m", "1h")  # plus each SLO's own budget window
MAX_PROBES = 8
MAX_ALERTS = 20
LINKS = (("metrics", "/metrics", "Prometheus exposition"), ("api/v1/slos", "/api/v1/slos", "SLO status (JSON)"),
         ("debug/probes", "/debug/probes", "recent probe results (JSON)"),
         ("debug/alerts", "/debug/alerts", "alerts, groups and the notification outbox (JSON)"),
         ("-/healthy", "/-/healthy", "liveness"), ("-/ready", "/-/ready", "readiness"))
STYLE = """body{font-family:system-ui,sans-serif;margin:1em;color:#222;max-width:70em}
.board{width:100%}.board td{vertical-align:top}.sev{font-weight:bold;padding:.15em .5em;border-radius:.3em;
white-space:nowrap}.page{background:#b00020;color:#fff}.ticket{background:#e07b00;color:#fff}
.breach{background:#fbd5d5;color:#8a1010}.ok{background:#d8f5d8;color:#145214}.quiet{background:#eee;color:#555}
.why{font-size:.95em}.lever{font-weight:bold}.held{color:#666;font-style:italic}.timeline{font-size:.9em;color:#444}
details{margin:.4em 0}.wrap{overflow-x:auto}
@media (max-width:700px){body{margin:.5em}td,th{padding:.15em .3em}}
h1{font-size:1.4em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
h3{font-size:1em;margin:1.2em 0 .3em}table{border-collapse:collapse;margin:.3em 0}
th,td{padding:.2em .7em;text-align:left;border-bottom:1px solid #eee;font-variant-numeric:tabular-nums}
th{background:#f4f4f4}.state{font-weight:bold;padding:.1em .5em;border-radius:.3em}
.OK{background:#d8f5d8;color:#145214}.BREACH{background:#fbd5d5;color:#8a1010}
.nodata{background:#eee;color:#555}.firing{background:#fbd5d5}.pending{background:#fff2c6}
.muted{color:#666;font-size:.9em}ul.notes{margin:.2em 0 0 0;padding-left:1.2em}"""


@dataclass(frozen=True)
class LandingInput:
    """Everything the page shows; plain data, so the renderer is a pure function."""

    version: str
    ready: bool
    now: float
    slos: Mapping[str, Any] = field(default_factory=dict)
    alerts: Mapping[str, Any] = field(default_factory=dict)
    probes: Sequence[Mapping[str, Any]] = ()
    samples: Sequence[Sample] = ()


def _state(state: str) -> str:
    css = "nodata" if state in (NO_DATA, "") else state
    return f'<span class="state {escape(css)}">{escape(state or NO_DATA)}</span>'


def _cell(c: Cell) -> str:
    return f"<td>{escape(c.text)}{' ' + _state(c.state) if c.state in (OK, BREACH) else ''}</td>"


def _badge(view: Mapping[str, Any]) -> str:
    """Return the SLO's state badge, coloured by what it means for the on-call: page, ticket, breach, ok."""
    sev, state = str(view.get("severity") or ""), str(view.get("state") or NO_DATA)
    css = sev or ("breach" if state in ("BREACH", "OVER BUDGET") else ("ok" if state == "OK" else "quiet"))
    word = f"{sev.upper()} · {state}" if sev else state
    return f'<span class="sev {css}">{escape(word)}</span>'


def _why(view: Mapping[str, Any]) -> str:
    why = view.get("why") or {}
    lever = f' <span class="lever">→ {escape(str(why["lever"]))}</span>' if why.get("lever") and \
        why.get("kind") == "verdict" else ""
    return f'<span class="why">{escape(str(why.get("text") or ""))}</span>{lever}'


def _board(slos: Sequence[Mapping[str, Any]]) -> str:
    """Return one row per SLO: badge, name, leading budget, the why line — what an on-call reads first."""
    rows = []
    for slo in slos:
        view = slo.get("incident")
        if not isinstance(view, Mapping):
            rows.append(f'<tr><td>{_state(NO_DATA)}</td><td>{escape(str(slo.get("name")))}</td>'
                        '<td colspan="2" class="muted">not evaluated yet</td></tr>')
            continue
        first = incident_text.lead(view)  # the SLI paging, else ticketing, else with the least budget left
        lead = incident_text.burn_text(first, str(view.get("slo_window"))) if first is not None else ""
        rows.append(f'<tr><td>{_badge(view)}</td><td><a href="#slo-{escape(str(view.get("name")), quote=True)}">'
                    f'{escape(str(view.get("name")))}</a></td><td class="what">{escape(lead)}</td>'
                    f"<td>{_why(view)}</td></tr>")
    if not rows:
        return '<p class="muted">no SLOs configured</p>'
    return f'<table class="board"><tr><th>state</th><th>SLO</th><th class="what">budget</th><th>why</th></tr>' \
           f"{''.join(rows)}</table>"


def _incident(view: Mapping[str, Any]) -> str:
    """Return one SLO's story: breaches, budgets (with the rows that hold), stages, worst replicas, evidence,
    timeline."""
    window = escape(str(view.get("window")))
    items = [f"<li>over {window} ({int(view.get('requests') or 0)} requests): "
             + escape("; ".join(str(b.get("text")) for b in view.get("breaches") or []) or "every objective holds")
             + "</li>"]
    for s in view.get("slis") or []:
        sev = f'<span class="sev {escape(str(s["severity"]))}">{escape(str(s["severity"]).upper())}</span> ' \
            if s.get("severity") else ""
        note = incident_text.sli_note(s)
        held = f' <span class="held">{escape(note.strip())}</span>' if note else ""
        rows = f' <span class="muted">[{escape("; ".join(s.get("rows") or []))}]</span>' if s.get("rows") else ""
        items.append(f"<li>{sev}{escape(incident_text.burn_text(s, str(view.get('slo_window'))))}{held}{rows}</li>")
    stages = [s for s in view.get("stages") or [] if s.get("budget")]
    if stages:
        cells = " · ".join(escape(incident_text.stage_text(s, view.get("worst_stage"))) for s in stages)
        items.append(f"<li>stages p95 over {window}: {cells}</li>")
    if incident_text.replicas_text(view):
        items.append(f"<li>{escape(incident_text.replicas_text(view))}</li>")
    why = view.get("why") or {}
    evidence = "".join(f"<li>{escape(str(e))}</li>" for e in why.get("evidence") or [])
    if evidence and view.get("state") != "OK":
        items.append(f"<li>evidence<ul>{evidence}</ul></li>")
    events = " · ".join(f"{escape(time.strftime('%H:%M:%S', time.localtime(e['at'])))} {escape(str(e.get('text')))}"
                        for e in (view.get("timeline") or [])[-8:] if isinstance(e.get("at"), int | float))
    if events:
        items.append(f'<li class="timeline">timeline: {events}</li>')
    return f'<ul class="notes">{"".join(items)}</ul>'


def _slo_block(slo: Mapping[str, Any]) -> str:
    own = [w for w in slo_windows(slo) if w not in LANDING_WINDOWS and w == slo.get("window")]
    table: SLOTable = slo_table(slo, [w for w in (*LANDING_WINDOWS, *own) if w in slo_windows(slo)])
    head = "".join(f"<th>{escape(w)}</th>" for w in table.windows)
    rows = "".join(f"<tr><th>{escape(label)}</th>{''.join(_cell(c) for c in cells)}</tr>"
                   for label, cells in table.rows)
    links = " ".join(f'<a href="{escape(str(slo[k]), quote=True)}">{k.removesuffix("_url")}</a>'
                     for k in ("runbook_url", "dashboard_url") if slo.get(k))
    view = slo.get("incident")
    badge = _badge(view) if isinstance(view, Mapping) else _state(NO_DATA)  # only the model judges
    return (f'<div class="slo" id="slo-{escape(table.name, quote=True)}"><h3>{badge} {escape(table.title)}</h3>'
            + (_incident(view) if isinstance(view, Mapping) else "")
            + (f"<details><summary>every window</summary><div class=\"wrap\"><table><tr><th>check</th>{head}</tr>"
               f"{rows}</table></div></details>" if table.windows else '<p class="muted">no data yet</p>')
            + (f"<p>{links}</p>" if links else "") + "</div>")


def _sources(samples: Iterable[Sample], now: float) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for s in samples:
        if not s.name.startswith("sloguard_source_"):
            continue
        labels = dict(s.labels)
        row = rows.setdefault((labels.get("source", ""), labels.get("target", "")), {"failures": {}})
        if s.name == "sloguard_source_up":
            row["up"] = s.value
        elif s.name == "sloguard_source_last_success_timestamp_seconds":
            row["age"] = max(0.0, now - s.value)
        elif s.name == "sloguard_source_failures_total":
            row["failures"][labels.get("reason", "?")] = s.value
    return [{"source": k[0], "target": k[1], **v} for k, v in sorted(rows.items()) if "up" in v]


def _sources_block(samples: Sequence[Sample], now: float) -> str:
    rows = []
    for r in _sources(samples, now):
        health = _state(OK) if r["up"] == 1 else '<span class="state BREACH">DOWN</span>'
        age = "never" if "age" not in r else f"{r['age']:.0f}s ago"
        fails = ", ".join(f"{escape(k)} {v:g}" for k, v in sorted(r["failures"].items())) or "-"
        rows.append(f"<tr><td>{escape(r['source'])}</td><td>{escape(r['target'] or '-')}</td><td>{health}</td>"
                    f"<td>{age}</td><td>{fails}</td></tr>")
    if not rows:
        return '<p class="muted">no source has run yet</p>'
    return ("<table><tr><th>source</th><th>target</th><th>health</th><th>last success</th>"
            f"<th>failures by reason</th></tr>{''.join(rows)}</table>")


def _ago(ts: Any, now: float) -> str:
    return f"{max(0.0, now - ts):.0f}s ago" if isinstance(ts, int | float) else "-"


def _alerts_block(doc: Mapping[str, Any], now: float) -> str:
    active = [a for a in doc.get("active") or [] if isinstance(a, Mapping)][:MAX_ALERTS]
    rows = []
    for a in active:
        labels = dict(a.get("labels") or [])
        notes = dict(a.get("annotations") or [])
        state = str(a.get("state", ""))
        shown = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "alertname")
        rows.append(f'<tr class="{escape(state, quote=True)}"><td>{escape(labels.get("alertname", "?"))}</td>'
                    f"<td>{escape(state)}</td><td>{_ago(a.get('fired_at') or a.get('active_at'), now)}</td>"
                    f"<td>{escape(notes.get('summary', ''))}</td><td class=\"muted\">{escape(shown)}</td></tr>")
    outbox = doc.get("outbox") or {}
    waiting, dead = len(outbox.get("waiting") or []), len(outbox.get("dead") or [])
    table = ("<table><tr><th>alert</th><th>state</th><th>since</th><th>summary</th><th>labels</th></tr>"
             f"{''.join(rows)}</table>") if rows else '<p class="muted">no pending or firing alerts</p>'
    return table + f'<p class="muted">notification outbox: {waiting} waiting, {dead} given up (see debug/alerts)</p>'


def _probes_block(probes: Sequence[Mapping[str, Any]], now: float) -> str:
    rows = []
    for p in list(probes)[:MAX_PROBES]:
        ok = _state(OK) if p.get("ok") else '<span class="state BREACH">FAILED</span>'
        rows.append(f"<tr><td>{escape(str(p.get('probe', '')))}</td><td>{escape(str(p.get('target', '')))}</td>"
                    f"<td>{ok}</td><td>{_ago(p.get('ts'), now)}</td><td>{seconds(p.get('ttft_s'))}</td>"
                    f"<td>{seconds(p.get('e2e_s'))}</td><td>{escape(str(p.get('error') or ''))[:200]}</td></tr>")
    if not rows:
        return '<p class="muted">no probe results yet</p>'
    return ("<table><tr><th>probe</th><th>target</th><th>result</th><th>when</th><th>TTFT</th><th>E2E</th>"
            f"<th>error</th></tr>{''.join(rows)}</table>")


def render(data: LandingInput) -> str:
    """Return the landing page HTML (UTF-8 text, about 1-2 KiB per SLO)."""
    slos = [s for s in data.slos.get("slos") or [] if isinstance(s, Mapping)]
    states = [str((s.get("incident") or {}).get("state") or NO_DATA) for s in slos]
    sevs = [str((s.get("incident") or {}).get("severity") or "") for s in slos]
    summary = ", ".join([f"{sevs.count(v)} {v.upper()}" for v in ("page", "ticket") if sevs.count(v)]
                        + [f"{states.count(s)} {s}" for s in (BREACH, "OVER BUDGET", OK, NO_DATA) if states.count(s)])
    links = "".join(f'<li><a href="{href}">{escape(path)}</a> <span class="muted">{escape(what)}</span></li>'
                    for href, path, what in LINKS)
    ready = "ready" if data.ready else "not ready (first evaluation pending)"
    when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(data.now))
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="15">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sloguard: {escape(summary or 'no SLOs')}</title><style>{STYLE}</style></head><body>
<h1>sloguard {escape(data.version)}</h1>
<p class="muted">LLM inference latency SLOs. {escape(ready)}; {escape(when)}; reloads every 15 s.
Ratios are shown as percentages; each check is judged over the window in its column.</p>
<h2>SLOs{f' ({escape(summary)})' if summary else ''}</h2>
{_board(slos)}
{''.join(_slo_block(s) for s in slos)}
<h2>Targets and sources</h2>
{_sources_block(data.samples, data.now)}
<h2>Alerts</h2>
{_alerts_block(data.alerts, data.now)}
<h2>Recent probes</h2>
{_probes_block(data.probes, data.now)}
<h2>Links</h2>
<ul>{links}</ul>
</body></html>
"""


def gather(version: str, ready: bool, providers: Mapping[str, Callable[[], Any]], samples: Sequence[Sample],
           now: float | None = None) -> LandingInput:
    """Collect the page's inputs from the JSON providers; a provider that is missing or raises shows as empty."""
    def call(name: str, empty: Any) -> Any:
        fn = providers.get(name)
        try:
            value = fn() if fn is not None else empty
        except Exception:  # the page must render even while a provider is broken
            return empty
        return value if isinstance(value, type(empty)) else empty

    return LandingInput(version=version, ready=ready, now=time.time() if now is None else now,
                        slos=call("slos", {}), alerts=call("alerts", {}), probes=call("probes", []),
                        samples=samples)
