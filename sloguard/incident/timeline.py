"""An SLO's incident timeline: breached, paged, verdict, resolved, recovered — one event per change (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from sloguard.alerts.engine import Transition
from sloguard.incident.model import Event, SLOView

MAX_EVENTS = 12  # the last dozen changes: an incident and the one before it


def _alert_event(t: Transition, now: float) -> Event:
    lab = dict(t.alert.labels)
    what = f"{lab.get('severity', '')} {t.alert.name}" + (f" ({lab['sli']})" if lab.get("sli") else "")
    if t.kind == "firing":
        return Event(t.alert.fired_at or now, "page" if lab.get("severity") in ("page", "critical") else "alert",
                     f"{what} fired")
    return Event(t.alert.resolved_at or now, "resolved", f"{what} resolved")


def advance(events: Sequence[Event], old: SLOView | None, new: SLOView, transitions: Sequence[Transition],
            now: float) -> tuple[Event, ...]:
    """Return the timeline after one evaluation: state changes, the SLO's alert transitions, a new named cause."""
    out = list(events)
    before = old.state if old is not None else "NO DATA"
    if new.state in ("BREACH", "OVER BUDGET") and before not in ("BREACH", "OVER BUDGET"):
        out.append(Event(now, "breach", f"{new.state.lower()}: {'; '.join(b.text for b in new.breaches)}"))
    elif new.state == "OK" and before in ("BREACH", "OVER BUDGET"):
        out.append(Event(now, "recovered", "every objective holds again"))
    out += [_alert_event(t, now) for t in transitions if dict(t.alert.labels).get("slo") == new.name]
    cause = new.why.cause if new.why.kind == "verdict" else ""
    if cause and (old is None or old.why.cause != cause or old.why.kind != "verdict"):
        out.append(Event(now, "verdict", new.why.text))
    return tuple(out[-MAX_EVENTS:])
