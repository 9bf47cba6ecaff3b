"""Alert state machine: pending, firing, keep_firing_for, resolution, per-series instances, templating."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sloguard.alerts import engine
from sloguard.alerts.engine import Alert
from sloguard.alerts.rules import Rule, builtin_rules, burn_rules, parse_expr
from sloguard.model import Sample
from sloguard.slo.model import SLO


def rule(for_: float = 0.0, keep: float = 0.0) -> Rule:
    return Rule("High", (parse_expr("m > 1"),), for_, keep, {"severity": "page"},
                {"summary": "{{ $labels.inst }} is {{ $value }}"})


def run(r: Rule, values: Sequence[float | None], step: float = 15.0) -> list[str]:
    """Return the state per step ('-' inactive) and transition marks (+ firing, ! resolved)."""
    active: dict[str, Alert] = {}
    out = []
    for i, v in enumerate(values):
        samples = [] if v is None else [Sample("m", {"inst": "a"}, v)]
        active, events = engine.evaluate([r], active, samples, i * step)
        state = next(iter(active.values())).state[0] if active else "-"
        out.append(state + "".join("+" if e.kind == "firing" else "!" for e in events))
    return out


@pytest.mark.parametrize(("for_", "keep", "values", "expected"), [
    (0, 0, [0, 2, 2, 0], ["-", "f+", "f", "-!"]),
    (30, 0, [2, 2, 2, 2, 0], ["p", "p", "f+", "f", "-!"]),
    (30, 0, [2, 2, 0, 2], ["p", "p", "-", "p"]),                 # pending drops silently
    (30, 0, [2, None, 2], ["p", "-", "p"]),                      # absent series = false
    (0, 30, [2, 0, 0, 0, 2], ["f+", "f", "f", "-!", "f+"]),  # kept 30s, then resolved
    (0, 30, [2, 0, 2, 0, 0, 0], ["f+", "f", "f", "f", "f", "-!"]),       # keep timer restarts
])
def test_transitions(for_: float, keep: float, values: list[float | None], expected: list[str]) -> None:
    assert run(rule(for_, keep), values) == expected


def test_each_series_is_its_own_instance_with_templated_annotations() -> None:
    samples = [Sample("m", {"inst": "a"}, 2.0), Sample("m", {"inst": "b"}, 3.0), Sample("m", {"inst": "c"}, 0.0)]
    active, events = engine.evaluate([rule()], {}, samples, 0.0)
    got = sorted((dict(a.labels)["inst"], dict(a.annotations)["summary"]) for a in active.values())
    assert got == [("a", "a is 2"), ("b", "b is 3")]
    assert all(dict(a.labels)["alertname"] == "High" and dict(a.labels)["severity"] == "page"
               for a in active.values())
    assert len(events) == 2


@pytest.mark.parametrize(("long_v", "short_v", "fires"), [
    (20.0, 20.0, True), (20.0, 1.0, False), (1.0, 20.0, False), (13.44, 13.44, False),
])
def test_burn_rule_needs_both_windows(long_v: float, short_v: float, fires: bool) -> None:
    slo = SLO(name="s", target="t", error_objective=0.99, window=28 * 86400.0)
    page = burn_rules(slo)[0]  # 1h/5m at 0.02 × 28d / 1h = 13.44
    samples = [Sample("sloguard_slo_burn_rate", {"slo": "s", "window": "1h"}, long_v),
               Sample("sloguard_slo_burn_rate", {"slo": "s", "window": "5m"}, short_v),
               Sample("sloguard_slo_burn_rate", {"slo": "other", "window": "5m"}, 99.0)]
    active, _ = engine.evaluate([page], {}, samples, 0.0)
    assert bool(active) is fires
    if fires:
        a = next(iter(active.values()))
        assert dict(a.labels) == {"alertname": "SloguardErrorBudgetBurn", "severity": "page", "slo": "s",
                                  "long_window": "1h", "short_window": "5m"}


def test_removed_rule_resolves_its_firing_alerts() -> None:
    active, _ = engine.evaluate([rule()], {}, [Sample("m", {}, 2.0)], 0.0)
    active, events = engine.evaluate([], active, [Sample("m", {}, 2.0)], 15.0)
    assert active == {} and [e.kind for e in events] == ["resolved"]


@pytest.mark.parametrize(("labels", "values", "expected", "instances"), [
    ({"team": "{{ $labels.inst }}-oncall"}, [2.0, 3.0], {"team": "a-oncall"}, 1),
    ({"level": '{{ $value | printf "%.0f" }}'}, [2.0], {"level": "2"}, 1),
    # A label holding $value is a new instance per value change: Prometheus behaves the same.
    ({"level": "{{ $value }}"}, [2.0, 3.0], {"level": "3"}, 2),
    ({"severity": "page"}, [2.0], {"severity": "page"}, 1),
])
def test_labels_are_templated_before_fingerprinting(labels: dict[str, str], values: list[float],
                                                    expected: dict[str, str], instances: int) -> None:
    r = Rule("High", (parse_expr("m > 1"),), labels=labels)
    active: dict[str, Alert] = {}
    seen: set[str] = set()
    for i, v in enumerate(values):
        active, _ = engine.evaluate([r], active, [Sample("m", {"inst": "a"}, v)], i * 15.0)
        seen.update(active)
    (alert,) = active.values()
    assert {k: dict(alert.labels)[k] for k in expected} == expected and len(seen) == instances


# probe -> interval; ages seen -> which probes' SloguardProbeStale fires (threshold max(600 s, 3 × interval))
@pytest.mark.parametrize(("intervals", "ages", "stale"), [
    ({"fast": 30.0}, {"fast": 601.0}, {"fast"}),
    ({"fast": 30.0, "slow": 600.0}, {"fast": 900.0, "slow": 900.0}, {"fast"}),
    ({"fast": 30.0, "slow": 600.0}, {"fast": 10.0, "slow": 1801.0}, {"slow"}),
    ({"slow": 600.0, "slower": 3600.0}, {"slow": 1801.0, "slower": 1801.0}, {"slow"}),
    ({}, {"gone": 601.0}, {"gone"}),  # a probe without config keeps the 600 s rule
])
def test_stale_probe_threshold_follows_the_probe_interval(intervals: dict[str, float], ages: dict[str, float],
                                                         stale: set[str]) -> None:
    rules = [r for r in builtin_rules(intervals) if r.name == "SloguardProbeStale"]
    samples = [Sample("sloguard_probe_last_success_age_seconds", {"probe": p}, a) for p, a in ages.items()]
    active, _ = engine.evaluate(rules, {}, samples, 0.0)
    active, _ = engine.evaluate(rules, active, samples, 60.0)  # for: 1m
    assert {dict(a.labels)["probe"] for a in active.values() if a.state == "firing"} == stale
