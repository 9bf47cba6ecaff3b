"""Alert state machine: pending, firing, keep_firing_for, resolution, per-series instances, templating."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sloguard.alerts import engine
from sloguard.alerts.engine import Alert
from sloguard.alerts.rules import Rule, builtin_rules, burn_rules, parse_expr
from sloguard.config.units import format_duration
from sloguard.model import Sample
from sloguard.slo.model import SLO, Goodput, Objective, indicators


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


def _burn_samples(long_v: float, short_v: float, evidence: float, sli: str = "latency") -> list[Sample]:
    lab = {"slo": "ux", "sli": sli}
    return [Sample("sloguard_slo_burn_rate", {**lab, "window": "5m"}, long_v),
            Sample("sloguard_slo_burn_rate", {**lab, "window": "1m"}, short_v),
            Sample("sloguard_slo_burn_evidence_ratio", {**lab, "window": "5m"}, evidence),
            Sample("sloguard_slo_burn_rate", {"slo": "other", "sli": sli, "window": "1m"}, 99.0),
            Sample("sloguard_slo_error_budget_remaining_ratio", lab, 0.09),
            Sample("sloguard_slo_window_coverage_ratio", lab, 2 / 24)]


@pytest.mark.parametrize(("long_v", "short_v", "evidence", "fires"), [
    (62.0, 62.0, 1.0, True), (62.0, 1.0, 5.0, False), (1.0, 62.0, 5.0, False), (14.4, 14.4, 5.0, False),
    (62.0, 62.0, 0.99, False),  # a 62x "burn" from too few bad requests to be significant
])
def test_burn_rule_needs_both_windows_and_evidence(long_v: float, short_v: float, evidence: float,
                                                   fires: bool) -> None:
    slo = SLO(name="ux", target="t", goodput=Goodput(0.99, ttft=0.8), window=86400.0, probe_rate=2.0)
    page = burn_rules(slo)[0]  # 5m/1m at 14.4x on a 1d window
    active, _ = engine.evaluate([page], {}, _burn_samples(long_v, short_v, evidence), 0.0)
    assert bool(active) is fires
    if fires:
        a = next(iter(active.values()))
        assert dict(a.labels) == {"alertname": "SloguardErrorBudgetBurn", "severity": "page", "slo": "ux",
                                  "sli": "latency"}
        assert dict(a.annotations)["summary"] == ("SLO ux latency budget burning 62x (page); 9% of the 1d budget "
                                                  "left (2h 0m 0s of data)")


def test_burn_rules_skip_rows_that_cannot_mean_anything() -> None:
    """A median objective (50% allowed misses) can burn 2x at most: only the 1x ticket row is kept."""
    slo = SLO(name="s", target="t", objectives=(Objective("tpot", 50, 0.05),), window=86400.0, probe_rate=0.5)
    rules = burn_rules(slo)
    got = {(dict(r.labels)["sli"], dict(r.labels)["severity"]) for r in rules}
    assert got == {("availability", "page"), ("availability", "ticket"), ("latency", "ticket")}
    latency_ticket = next(r for r in rules if dict(r.labels)["sli"] == "latency")
    assert {e.matchers for c in latency_ticket.any_of for e in c[:1]} and all(
        'metric="tpot"' in " ".join(m.promql() for m in c[0].matchers) for c in latency_ticket.any_of)


def _all_rows_samples(slo: SLO, burn: float) -> list[Sample]:
    """Every budget of the SLO burning `burn` in every window, with enough evidence."""
    out = []
    for w in slo.windows:
        for ind in indicators(slo):
            lab = {"slo": slo.name, **ind.labels(), "window": format_duration(w)}
            out += [Sample("sloguard_slo_burn_rate", lab, burn), Sample("sloguard_slo_burn_evidence_ratio", lab, 9.0)]
    return out


def test_one_fault_gives_one_page_and_one_ticket_per_sli_not_one_per_row() -> None:
    """The storm (issue 46): every budget and every row holding gives one alert per SLO x SLI x severity."""
    slo = SLO(name="chat", target="t", objectives=(Objective("ttft", 95, 1.0), Objective("tpot", 50, 0.05)),
              window=28 * 86400.0, probe_rate=0.5, error_objective=0.99)
    rules = burn_rules(slo)
    active, events = engine.evaluate(rules, {}, _all_rows_samples(slo, 100.0), 0.0)
    got = sorted((dict(a.labels)["sli"], dict(a.labels)["severity"]) for a in active.values())
    assert got == [("availability", "page"), ("availability", "ticket"), ("latency", "page"), ("latency", "ticket")]
    assert len(events) == 4
    again, events = engine.evaluate(rules, active, _all_rows_samples(slo, 120.0), 15.0)
    assert events == [] and set(again) == set(active)  # no transition (and so no log line) while nothing changes


def test_page_and_ticket_on_the_same_windows_keep_apart() -> None:
    """A 1h SLO's page and ticket rows both read 5m/1m; they used to share a rule key and flap resolved."""
    slo = SLO(name="short", target="t", error_objective=0.9, window=3600.0, probe_rate=1.0)
    rules = burn_rules(slo)
    assert len({r.key for r in rules}) == len(rules) == 2
    active: dict[str, Alert] = {}
    kinds = []
    for i in range(6):
        active, events = engine.evaluate(rules, active, _all_rows_samples(slo, 8.0), i * 0.5)
        kinds += [e.kind for e in events]
    assert kinds == ["firing", "firing"] and len(active) == 2


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


@pytest.mark.parametrize(("burns", "expected"), [
    # 1d SLO page row 5m/1m at 14.4x: the hold is its short window (60 s); steps of 15 s.
    ([62, 10, 62, 10, 62, 10, 10, 10, 10, 10], ["f+", "f", "f", "f", "f", "f", "f", "f", "f", "-!"]),  # hovering
    ([62, 10, 10, 10, 10, 10], ["f+", "f", "f", "f", "f", "-!"]),  # cured: resolved one short window later
    ([10, 62, 62, 10], ["-", "f+", "f", "f"]),
])
def test_a_burn_hovering_at_its_factor_pages_once(burns: list[float], expected: list[str]) -> None:
    """The CPU-burn incident paged, resolved and paged again as the burn crossed 14.4x both ways (issue 46)."""
    slo = SLO(name="ux", target="t", goodput=Goodput(0.99, ttft=0.8), window=86400.0, probe_rate=2.0)
    page = burn_rules(slo)[0]
    assert page.keep_firing_for == 60.0  # the row's short window (burn_hold)
    active: dict[str, Alert] = {}
    out = []
    for i, b in enumerate(burns):
        active, events = engine.evaluate([page], active, _burn_samples(b, b, 5.0), i * 15.0)
        out.append(("f" if active else "-") + "".join("+" if e.kind == "firing" else "!" for e in events))
    assert out == expected


def test_each_burn_alert_holds_for_its_own_shortest_short_window() -> None:
    """The 30 d Workbook rows: pages hold 5m (1h/5m, 6h/30m), tickets 2h (1d/2h, 3d/6h)."""
    slo = SLO(name="chat", target="t", error_objective=0.999, window=30 * 86400.0, probe_rate=1.0)
    got = {dict(r.labels)["severity"]: r.keep_firing_for for r in burn_rules(slo)}
    assert got == {"page": 300.0, "ticket": 7200.0}
