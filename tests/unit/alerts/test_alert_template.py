"""The alert template subset the live engine renders exactly as Prometheus does (promtool checks the pairs)."""

from __future__ import annotations

import pytest

from sloguard.alerts.template import humanize_duration, humanize_percentage, render
from sloguard.config.expr import Matcher


# Prometheus template functions' outputs (Go: fmt "%.4g"; durations "1d 2h 3m 4s")
@pytest.mark.parametrize(("v", "want"), [(0.09, "9%"), (0.9138, "91.38%"), (1.0, "100%"), (-0.5, "-50%"),
                                         (0.123456, "12.35%")])
def test_humanize_percentage(v: float, want: str) -> None:
    assert humanize_percentage(v) == want


@pytest.mark.parametrize(("v", "want"), [(0.0, "0s"), (7200.0, "2h 0m 0s"), (93784.0, "1d 2h 3m 4s"),
                                         (125.5, "2m 5s"), (4.5, "4.5s"), (0.25, "250ms"), (-90.0, "-1m 30s")])
def test_humanize_duration(v: float, want: str) -> None:
    assert humanize_duration(v) == want


SERIES = {("sloguard_slo_error_budget_remaining_ratio", "ux"): 0.09,
          ("sloguard_slo_window_coverage_ratio", "ux"): 1 / 12}


def lookup(metric: str, matchers: tuple[Matcher, ...]) -> list[float]:
    slo = next((m.value for m in matchers if m.label == "slo"), "")
    if (metric, slo) == ("sloguard_slo_error_budget_remaining_ratio", "two"):
        return [0.5, -0.25]  # two latency budgets: min() reads the worse
    return [v] if (v := SERIES.get((metric, slo))) is not None else []


@pytest.mark.parametrize(("template", "want"), [
    ('{{ with query "sloguard_slo_error_budget_remaining_ratio{slo=\'ux\',sli=\'latency\'}" }}'
     "{{ . | first | value | humanizePercentage }}{{ end }} left", "9% left"),
    ('({{ with query "sloguard_slo_window_coverage_ratio{slo=\'ux\'} * 86400" }}'
     "{{ . | first | value | humanizeDuration }}{{ end }} of data)", "(2h 0m 0s of data)"),
    ('{{ with query "sloguard_slo_window_coverage_ratio{slo=\'other\'}" }}'
     "{{ . | first | value | humanizeDuration }}{{ end }}!", "!"),  # no series: `with` renders nothing
    ('burning {{ $value | printf "%.3g" }}x on {{ $labels.slo }}', "burning 62x on ux"),
    ('{{ with query "min(sloguard_slo_error_budget_remaining_ratio{slo=\'two\',sli=\'latency\'})" }}'
     "{{ . | first | value | humanizePercentage }}{{ end }} left", "-25% left"),
    ('{{ with query "sloguard_slo_error_budget_remaining_ratio{slo=\'two\'}" }}'
     "{{ . | first | value | humanizePercentage }}{{ end }} left", "50% left"),
])
def test_render(template: str, want: str) -> None:
    assert render(template, {"slo": "ux"}, 62.0, lookup) == want
