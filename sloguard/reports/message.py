"""The notification of an automatic release report: one message with the verdict, the top changes with their
intervals, and where the full report is (sent through the notifiers like an alert, with its own headline)."""

from __future__ import annotations

from typing import Any

from sloguard.alerts.engine import Alert
from sloguard.config.runbooks import DEFAULT_TEMPLATE, runbook_url
from sloguard.reports import text
from sloguard.reports.releases import Boundary

ALERTNAME = "SloguardReleaseReport"


def _name(ident: dict[str, Any] | None, fallback: str) -> str:
    if not ident:
        return fallback[:8]
    return text.label({"identity": ident, "spec": fallback[:8]})


def report_alert(b: Boundary, doc: dict[str, Any], before: dict[str, Any] | None,
                 after: dict[str, Any] | None, runbooks: str = DEFAULT_TEMPLATE) -> Alert:
    """Return the message as an Alert (labels route it: alertname, target, severity, verdict)."""
    verdict = str(doc["verdict"])
    word = text.VERDICT_WORD[verdict]
    headline = f"Release report {b.target}: {_name(before, b.before)} → {_name(after, b.after)}: {word}"
    lines = [f"• {text.what(c)}{' (' + text.scope(c) + ')' if text.scope(c) else ''}: {text.value(c, 'baseline')} → "
             f"{text.value(c, 'candidate')}, {text.change(c)} ({c['verdict']})" for c in doc["top_changes"]]
    counts = doc["counts"]
    lines.append(f"{counts['regression']} regression(s), {counts['improvement']} improvement(s), "
                 f"{counts['no significant change']} unchanged, {counts['not enough data']} not enough data; "
                 f"{doc['baseline']['requests']} vs {doc['candidate']['requests']} probe requests")
    lines.append(f"Full report: {b.report_path}/report.html (also .md, .json)")
    severity = "warning" if verdict == "regression" else "info"
    labels = tuple(sorted({"alertname": ALERTNAME, "target": b.target, "severity": severity,
                           "verdict": verdict, "boundary": str(b.id)}.items()))
    notes = {"headline": headline, "summary": text.summary(doc), "description": "\n".join(lines),
             "report_path": b.report_path, "runbook_url": runbook_url(runbooks, ALERTNAME)}
    annotations = tuple(sorted((k, v) for k, v in notes.items() if v))
    return Alert(ALERTNAME, labels, annotations, "firing", b.at, float(counts["regression"]), fired_at=b.at)
