"""Human-readable SLO status: percentages for ratios, units for durations, verdicts per window, no data as such."""

from __future__ import annotations

from typing import Any

import pytest

from sloguard.slo.status import (
    BREACH,
    NO_DATA,
    OK,
    percent,
    render_status,
    render_table,
    seconds,
    slo_lines,
    slo_table,
    threshold,
)


def _doc(goodput_5m: float | None = 0.7, ttft_5m: float | None = 0.812,
         compliant: bool | None = False) -> dict[str, Any]:
    return {
        "name": "chat", "source": "probe", "target": "sim", "window": "1d", "goodput_target": 0.95,
        "error_budget_remaining": 0.932, "worst_stage": "decode",
        "objectives": [
            {"metric": "ttft", "percentile": 95.0, "threshold": 0.5, "window": "5m", "segment": "",
             "value": ttft_5m, "compliant": compliant},
            {"metric": "ttft", "percentile": 95.0, "threshold": 0.5, "window": "1h", "segment": "",
             "value": 0.21, "compliant": True},
            {"metric": "ttft", "percentile": 95.0, "threshold": 0.5, "window": "5m", "segment": "short",
             "value": 9.0, "compliant": False},
        ],
        "windows": [
            {"window": "1h", "segment": "", "requests": 300, "goodput_ratio": 0.97},
            {"window": "5m", "segment": "", "requests": 25, "goodput_ratio": goodput_5m},
        ],
        # the real document's shape: burns per budget and window (the windows carry none)
        "burns": [{"sli": "latency", "window": "5m", "burn_rate": 6.0}, {"sli": "latency", "window": "1h",
                                                                          "burn_rate": 0.6}],
        "stages": [{"stage": "decode", "window": "5m", "segment": "", "p95": 1.6, "budget": 1.5, "estimate": False},
                   {"stage": "queue", "window": "5m", "segment": "", "p95": 0.004, "budget": 0.05,
                    "bounded": True}],
    }


@pytest.mark.parametrize(("fn", "value", "text"), [
    (seconds, 0.812, "812ms"), (seconds, 0.0042, "4.20ms"), (seconds, 12.34, "12.3s"), (seconds, None, NO_DATA),
    (percent, 0.7, "70.0%"), (percent, 0.95, "95.0%"), (percent, 1, "100.0%"), (percent, None, NO_DATA),
    (threshold, 0.05, "50ms"), (threshold, 1.0, "1s"), (threshold, 90.0, "90s"),
])
def test_formats(fn: Any, value: Any, text: str) -> None:
    assert fn(value) == text


def test_lines_print_goodput_and_target_both_as_percentages() -> None:
    lines = slo_lines(_doc())
    assert lines[0] == "SLO chat (probe, target sim), 5m window:"
    assert "BREACH   p95 ttft     812ms  (objective 500ms)" in lines[1]
    goodput = next(line for line in lines if "goodput" in line)
    assert "goodput 70.0% (target 95.0%)" in goodput and goodput.strip().startswith(BREACH)
    assert "0.95" not in "\n".join(lines)
    assert "  stage queue    p95   4.00ms of budget 50ms (bounded)" in lines
    assert "  error budget remaining (1d): 93.2%" in lines


def test_segments_are_left_out_of_the_all_buckets_lines() -> None:
    assert "9.0s" not in "\n".join(slo_lines(_doc()))


@pytest.mark.parametrize(("kwargs", "state"), [
    ({}, BREACH),
    ({"goodput_5m": 0.99, "compliant": True}, OK),
    ({"goodput_5m": None, "ttft_5m": None, "compliant": None}, NO_DATA),
])
def test_table_state_is_judged_on_the_shortest_window(kwargs: dict[str, Any], state: str) -> None:
    table = slo_table(_doc(**kwargs))
    assert table.windows == ("5m", "1h") and table.state == state


def test_table_text_has_a_column_per_window() -> None:
    text = render_table(slo_table(_doc()))
    lines = text.splitlines()
    assert lines[0] == "SLO chat (probe, target sim): BREACH"
    assert lines[1].split() == ["CHECK", "5m", "1h"]
    assert lines[2].split() == ["p95", "ttft", "<=", "500ms", "812ms", "BREACH", "210ms", "OK"]
    assert lines[3].split() == ["goodput", ">=", "95.0%", "70.0%", "BREACH", "97.0%", "OK"]
    assert lines[4].split() == ["requests", "25", "300"] and lines[5].split() == ["latency", "burn", "6x", "0.6x"]
    assert "error budget remaining (1d): 93.2%" in lines


def test_empty_and_malformed_documents_say_so() -> None:
    assert render_status({}) == "(waiting for the first evaluation)"
    assert render_status(["not", "a", "doc"]) == "(waiting for the first evaluation)"
    assert "no data" in "\n".join(slo_lines({"name": "x", "objectives": [{"window": "5m", "metric": "ttft",
                                                                          "percentile": 95, "threshold": 1}]}))
