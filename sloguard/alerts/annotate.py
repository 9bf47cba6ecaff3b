"""Extra annotations from outside the rule engine (the diagnosis verdict), merged into alerts after each step.

Rules render their own annotations at every evaluation; `extra` adds annotations that depend on state the
rules cannot template (e.g. the bottleneck verdict of the alert's SLO). Pure: alerts in, alerts out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from sloguard.alerts.engine import Alert, Transition

Extra = Callable[[Mapping[str, str]], Mapping[str, str]]


def annotate(alert: Alert, extra: Extra) -> Alert:
    """Return the alert with `extra(labels)` merged over its annotations (rule annotations win on a clash)."""
    more = extra(dict(alert.labels))
    if not more:
        return alert
    mine = dict(alert.annotations)
    merged = {**more, **{k: v for k, v in mine.items() if k not in more or not k.startswith("diagnosis")}}
    return replace(alert, annotations=tuple(sorted(merged.items())))


def annotate_all(active: Mapping[str, Alert], events: list[Transition],
                 extra: Extra) -> tuple[dict[str, Alert], list[Transition]]:
    """Return active alerts and transitions with the extra annotations merged in."""
    return ({fp: annotate(a, extra) for fp, a in active.items()},
            [replace(ev, alert=annotate(ev.alert, extra)) for ev in events])
