"""The incident model as text: the terminal lines (`sloguard status`, the demo, `evaluate`) and one-line headlines.

Pure functions over the model's JSON (sloguard.incident.model.as_json), tolerant of missing keys. Every line goes
through the terminal escaper: SLO and target names come from configs, evidence from peers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from sloguard import escape
from sloguard.alerts.template import humanize_percentage
from sloguard.slo.status import seconds

Doc = Mapping[str, Any]
MARK = {"BREACH": "✗", "OVER BUDGET": "!", "OK": "✓", "NO DATA": "·"}


def burn_text(s: Doc, slo_window: str) -> str:
    """Return one SLI's budget as a phrase: `latency burning 62.9x over 1h, 91.0% of the 1d budget left`."""
    burn = s.get("burn")
    rate = f"burning {burn:.3g}x over {s.get('burn_window')}" if isinstance(burn, int | float) else "no burn data"
    left = s.get("budget_left")  # formatted as the alerts' summaries format it: the same digits everywhere
    budget = (f"{humanize_percentage(left)} of the {slo_window} budget left" if isinstance(left, int | float)
              else "budget: no data")
    return f"{s.get('sli')} {rate}, {budget}"


def lead(doc: Doc) -> Doc | None:
    """Return the SLI that matters most now: the one paging, else ticketing, else the least budget left."""
    slis = [s for s in doc.get("slis") or [] if isinstance(s, Mapping)]
    if not slis:
        return None
    order = {"page": 0, "ticket": 1, "": 2}

    def rank(s: Doc) -> tuple[int, float]:
        left = s.get("budget_left")
        return order.get(str(s.get("severity") or ""), 2), left if isinstance(left, int | float) else 2.0
    return min(slis, key=rank)


def headline(doc: Doc) -> str:
    """Return the SLO in one line: state, severity, the leading SLI's burn and budget, and the why (≤ ~200 chars)."""
    sev = str(doc.get("severity") or "").upper()
    lead_sli = lead(doc)
    parts = [f"{doc.get('name')}: {doc.get('state')}" + (f", {sev}" if sev else "")]
    if lead_sli is not None:
        parts.append(burn_text(lead_sli, str(doc.get("slo_window", ""))))
    why = (doc.get("why") or {}).get("text")
    if why and doc.get("state") != "OK":
        parts.append(str(why))
    return escape.terminal(" — ".join(parts))


def _clock(ts: Any) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts)) if isinstance(ts, int | float) else "?"


def stage_text(s: Doc, worst: Any) -> str:
    """Return one stage: `queue 1.1s of 100ms OVER (most over budget)`."""
    budget = f" of {seconds(s['budget'])}" if s.get("budget") else ""
    flags = (" OVER" if s.get("over") else "") + (" (most over budget)" if s.get("stage") == worst else "")
    return f"{s.get('stage')} {'≤ ' if s.get('bounded') else ''}{seconds(s.get('p95'))}{budget}{flags}"


def sli_note(s: Doc) -> str:
    """Return why an SLI's alert reads as it does: its ticket held by the page, or its rows cleared but kept firing."""
    parts = []
    if isinstance(s.get("cleared_at"), int | float) and s.get("severity"):
        parts.append(f"its rows cleared at {_clock(s['cleared_at'])}; kept firing one short window, so a burn "
                     "hovering at its factor pages once")
    if s.get("held"):
        parts.append("its ticket held while the page fires")
    return f" ({'; '.join(parts)})" if parts else ""


def replicas_text(doc: Doc) -> str:
    """Return the worst replicas in one line: `worst replicas over 5m: r1: 83% of the bad requests (...)`, or ""."""
    shown = [str(r.get("text")) for r in doc.get("replicas") or [] if isinstance(r, Mapping)]
    return f"worst replicas over {doc.get('window', '?')}: " + " · ".join(shown) if shown else ""


def lines(doc: Doc) -> list[str]:
    """Return an SLO's lines for a terminal: the headline, then why, breaches, budgets, stages, worst replicas,
    timeline."""
    window = doc.get("window", "?")
    out = [f"{MARK.get(str(doc.get('state')), '?')} {headline(doc)}"]
    why = doc.get("why") or {}
    if why.get("text"):
        conf = why.get("confidence")
        sure = f" (confidence {conf:.0%})" if why.get("kind") == "verdict" and isinstance(conf, int | float) else ""
        out.append(f"    why: {why['text']}{sure}")
    out += [f"      - {e}" for e in why.get("evidence") or [] if doc.get("state") != "OK"]
    breaches = [str(b.get("text")) for b in doc.get("breaches") or []]
    out.append(f"    over {window} ({doc.get('requests', 0)} requests): "
               + ("; ".join(breaches) if breaches else "every objective holds"))
    for s in doc.get("slis") or []:
        sev = f" {str(s.get('severity')).upper()}{sli_note(s)}:" if s.get("severity") else ""
        rows = f" [{'; '.join(s.get('rows') or [])}]" if s.get("rows") else ""
        out.append(f"   {sev} {burn_text(s, str(doc.get('slo_window', '')))}{rows}".rstrip())
    stages = [stage_text(s, doc.get("worst_stage")) for s in doc.get("stages") or [] if s.get("budget")]
    if stages:
        out.append(f"    stages p95 over {window}: " + " · ".join(stages))
    if replicas_text(doc):
        out.append(f"    {replicas_text(doc)}")
    events = doc.get("timeline") or []
    if events:
        out.append("    timeline: " + " · ".join(f"{_clock(e.get('at'))} {e.get('text')}" for e in events[-5:]))
    return [escape.terminal(line) for line in out]


def render(slos: Sequence[Doc]) -> str:
    """Return every SLO's lines (from each SLO's `incident`), or a waiting line before the first evaluation."""
    views = [s.get("incident") for s in slos if isinstance(s, Mapping)]
    out = [line for v in views if isinstance(v, Mapping) for line in lines(v)]
    return "\n".join(out) or "(waiting for the first evaluation)"
