"""Bench behaviours: names with parameters, the --behaviours option, and figures per behaviour."""

from __future__ import annotations

import pytest
from helpers import rec

from sloguard.bench.behaviour import BEHAVIOURS, parse
from sloguard.bench.options import parse_behaviours
from sloguard.bench.summary import summarise
from sloguard.slo.model import SLO, Goodput


@pytest.mark.parametrize(("name", "expected"), [
    ("normal", ("normal", None)), ("disconnect", ("disconnect", None)), ("disconnect@16", ("disconnect", 16.0)),
    ("slow_reader@2.5", ("slow_reader", 2.5)), ("oversized", ("oversized", None)),
])
def test_parse(name: str, expected: tuple[str, float | None]) -> None:
    assert parse(name) == expected
    assert callable(BEHAVIOURS[name]("chat"))


@pytest.mark.parametrize(("name", "message"), [
    ("hangup", "unknown behaviour 'hangup'"), ("oversized@3", "takes no @parameter"),
    ("disconnect@x", "must be a number"), ("slow_reader@0", "must be > 0"),
])
def test_parse_rejects(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse(name)
    with pytest.raises(KeyError):
        BEHAVIOURS[name]


@pytest.mark.parametrize(("text", "expected"), [
    ("normal:90,disconnect@8:10", (("normal", 90.0), ("disconnect@8", 10.0))),
    ("normal,oversized:0.5", (("normal", 1.0), ("oversized", 0.5))),
])
def test_option(text: str, expected: tuple[tuple[str, float], ...]) -> None:
    assert parse_behaviours(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("disconnect:1", "needs some normal requests"), ("normal:x", "is not NAME:WEIGHT"),
    ("normal:0", "must be > 0"), ("normal,bogus:1", "unknown behaviour"),
])
def test_option_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_behaviours(text)


def test_summary_reports_each_behaviour_and_judges_goodput_on_normal_requests_only() -> None:
    slo = SLO(name="s", target="sim", goodput=Goodput(0.9, ttft=0.2))
    records = [rec(i, ttft=0.1) for i in range(6)] + \
              [rec(10 + i, ttft=0.05, e2e=0.06, output_tokens=4, behaviour="disconnect@4") for i in range(3)] + \
              [rec(20, ok=False, error="http 400: too long", behaviour="oversized", check_outcome="slow_reject"),
               rec(21, ok=True, behaviour="oversized", check_outcome="rejected", ttft=None, output_tokens=None)]
    s = summarise(records, [slo], stall_s=2.0)
    assert s["goodput"]["s"]["good"] == 6 and s["goodput"]["s"]["ratio"] == 1.0  # 6 normal requests, all good
    assert s["latency"]["ttft"]["n"] == 6
    by = s["by_behaviour"]
    assert by["disconnect@4"] == {"requests": 3, "ok": 3, "ok_ratio": 1.0, "errors": {},
                                  "ttft": by["disconnect@4"]["ttft"], "e2e": by["disconnect@4"]["e2e"],
                                  "output_tokens": 12, "checks": {}}
    assert by["disconnect@4"]["ttft"]["p50"] == pytest.approx(0.05)
    assert by["oversized"]["checks"] == {"rejected": 1, "slow_reject": 1}
    assert by["oversized"]["errors"] == {"http_400": 1} and by["normal"]["requests"] == 6
