"""Routing by label and Alertmanager-style grouping: group_wait, group_interval, repeat_interval, resolved."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from pydantic import TypeAdapter

from sloguard.alerts.engine import Alert
from sloguard.alerts.routing import Group, matches, route
from sloguard.alerts.state import group_from_dict, group_to_dict
from sloguard.config.notifiers import NotifierSpec

SPEC = TypeAdapter(NotifierSpec)


def spec(**kw: object) -> NotifierSpec:
    base = {"name": "n", "type": "webhook", "url": "http://x", "group_wait": "30s", "group_interval": "5m",
            "repeat_interval": "1h"}
    return SPEC.validate_python({**base, **kw})


def alert(name: str, sev: str = "page", slo: str = "s") -> Alert:
    labels = tuple(sorted({"alertname": name, "severity": sev, "slo": slo}.items()))
    return Alert(name, labels, (), "firing", 0.0, 1.0, fired_at=0.0)


def timeline(sp: NotifierSpec, steps: Mapping[float, Sequence[Alert]], until: float,
             step: float = 15.0) -> list[tuple[float, str, tuple[str, ...]]]:
    """Feed the firing set that holds from each key time on; return (time, status, alertnames+state)."""
    groups: dict[str, Group] = {}
    out = []
    current: Sequence[Alert] = []
    t = 0.0
    while t <= until:
        current = steps.get(t, current)
        groups, notes = route([sp], groups, current, t)
        for n in notes:
            out.append((t, n.status, tuple(f"{a.name}:{'r' if a.resolved_at else 'f'}" for a in n.alerts)))
        t += step
    return out


A, B = alert("A"), alert("B")


@pytest.mark.parametrize(("steps", "until", "expected"), [
    # first notification after group_wait; resolved notice on the next group_interval tick
    ({0.0: [A], 600.0: []}, 1000, [(30.0, "firing", ("A:f",)), (630.0, "resolved", ("A:r",))]),
    # an alert joining a group that has notified is sent after group_wait, not on the group_interval tick
    ({0.0: [A], 60.0: [A, B]}, 400, [(30.0, "firing", ("A:f",)), (90.0, "firing", ("A:f", "B:f"))]),
    # nothing new: repeat after repeat_interval (checked on group_interval ticks)
    ({0.0: [A]}, 3700, [(30.0, "firing", ("A:f",)), (3630.0, "firing", ("A:f",))]),
    # fired and resolved during group_wait: still told, once, as resolved (a page is never lost)
    ({0.0: [A], 15.0: []}, 400, [(30.0, "resolved", ("A:r",))]),
])
def test_grouping_timeline(steps: dict[float, list[Alert]], until: float,
                           expected: list[tuple[float, str, tuple[str, ...]]]) -> None:
    assert timeline(spec(group_by=["slo"]), steps, until) == expected


def _sent(sp: NotifierSpec, steps: Mapping[float, Sequence[Alert]], until: float) -> list[tuple[float, str, str]]:
    """Return (time, slo/sli/severity, f|r) per alert in each notification."""
    groups: dict[str, Group] = {}
    out, current, t = [], [], 0.0
    while t <= until:
        current = list(steps.get(t, current))
        groups, notes = route([sp], groups, current, t)
        for n in notes:
            for a in n.alerts:
                lab = dict(a.labels)
                out.append((t, f"{lab['slo']}/{lab.get('sli', '')}/{lab['severity']}", "r" if a.resolved_at else "f"))
        t += 15.0
    return sorted(out)


def _burn(sev: str, slo: str = "s", sli: str = "latency") -> Alert:
    labels = tuple(sorted({"alertname": "SloguardErrorBudgetBurn", "severity": sev, "slo": slo, "sli": sli}.items()))
    return Alert("b", labels, (), "firing", 0.0, 1.0, fired_at=0.0)


def test_a_second_slos_page_is_not_held_behind_the_first_ones_group() -> None:
    """Issue 46: with the old default group_by [alertname] the chat page fired 85 s and was never sent."""
    avail, chat = _burn("page", slo="avail", sli="availability"), _burn("page", slo="chat")
    steps = {0.0: [avail], 45.0: [avail, chat], 135.0: [avail]}
    defaults = SPEC.validate_python({"name": "n", "type": "webhook", "url": "http://x"})
    assert _sent(defaults, steps, 400) == [(30.0, "avail/availability/page", "f"), (75.0, "chat/latency/page", "f"),
                                           (375.0, "chat/latency/page", "r")]


def test_a_ticket_is_held_while_its_page_fires() -> None:
    page, ticket, other = _burn("page"), _burn("ticket"), _burn("ticket", sli="availability")
    sp = SPEC.validate_python({"name": "n", "type": "webhook", "url": "http://x"})
    got = _sent(sp, {0.0: [page, ticket, other], 300.0: [ticket, other]}, 700)
    assert got == [(30.0, "s/availability/ticket", "f"), (30.0, "s/latency/page", "f"),
                   (330.0, "s/latency/page", "r"), (330.0, "s/latency/ticket", "f")]


def test_send_resolved_false_sends_no_resolved_notice() -> None:
    got = timeline(spec(send_resolved=False), {0.0: [A], 100.0: []}, 700)
    assert got == [(30.0, "firing", ("A:f",))]


def test_group_by_alertname_splits_groups() -> None:
    got = timeline(spec(group_by=["alertname"]), {0.0: [A, B]}, 40)
    assert got == [(30.0, "firing", ("A:f",)), (30.0, "firing", ("B:f",))]


@pytest.mark.parametrize(("match", "labels", "expected"), [
    ({}, {"severity": "info"}, True),
    ({"severity": ["page", "critical"]}, {"severity": "critical"}, True),
    ({"severity": ["page"]}, {"severity": "warning"}, False),
    ({"severity": ["page"], "team": ["a"]}, {"severity": "page"}, False),
])
def test_match(match: dict[str, list[str]], labels: dict[str, str], expected: bool) -> None:
    assert matches(spec(match=match), labels) is expected


def test_alertmanager_resends_firing_and_resolved_for_a_while() -> None:
    am = SPEC.validate_python({"name": "am", "type": "alertmanager", "url": "http://x", "resend_interval": "1m",
                               "resolved_resend_for": "2m"})
    got = timeline(am, {0.0: [A], 120.0: []}, 400)
    assert got == [(0.0, "firing", ("A:f",)), (60.0, "firing", ("A:f",)), (120.0, "resolved", ("A:r",)),
                   (180.0, "resolved", ("A:r",)), (240.0, "resolved", ("A:r",))]


def test_alertmanager_hears_a_change_at_once_not_on_the_next_resend_tick() -> None:
    am = SPEC.validate_python({"name": "am", "type": "alertmanager", "url": "http://x", "resend_interval": "1m",
                               "resolved_resend_for": "1m"})
    got = timeline(am, {0.0: [A], 15.0: [A, B], 30.0: [B]}, 100)
    assert got == [(0.0, "firing", ("A:f",)), (15.0, "firing", ("A:f", "B:f")),
                   (30.0, "firing", ("A:r", "B:f")), (90.0, "firing", ("A:r", "B:f"))]


def test_two_alertmanagers_each_keep_their_own_group() -> None:
    specs = [SPEC.validate_python({"name": name, "type": "alertmanager", "url": "http://x", "resend_interval": "1m",
                                   "resolved_resend_for": "1m"}) for name in ("am1", "am2")]
    groups: dict[str, Group] = {}
    got: list[tuple[float, str, str, tuple[str, ...]]] = []
    for t, firing in ((0.0, [A]), (60.0, [A]), (90.0, []), (150.0, []), (210.0, [])):
        groups, notes = route(specs, groups, firing, t)
        got.extend((t, n.notifier, n.status, tuple(f"{a.name}:{'r' if a.resolved_at else 'f'}" for a in n.alerts))
                   for n in notes)
    expected = [[(0.0, "firing", ("A:f",)), (60.0, "firing", ("A:f",)), (90.0, "resolved", ("A:r",)),
                 (150.0, "resolved", ("A:r",))]] * 2
    assert [[(t, s, a) for t, n, s, a in got if n == name] for name in ("am1", "am2")] == expected
    assert len({n.group_key for n in notes}) == len(notes)


def test_legacy_alertmanager_group_key_is_migrated_on_load() -> None:
    legacy = {**group_to_dict(Group("am1", "all", (), {}, 0.0)), "key": "all"}
    assert group_from_dict(legacy).key == "am1/all"
