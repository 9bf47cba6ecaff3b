"""Engine span maps read the captured-shaped fixtures of every engine; Rust durations and units parse."""

from __future__ import annotations

from typing import Any

import pytest
from support.otlp import ENGINES, fixture

from sloguard.traces.engines import ENGINE_SPANS, best, complete, from_spans, relevant, seconds
from sloguard.traces.span import SpanData

T0 = 1_700_000_000_000_000_000


def spans_of(fx: dict[str, Any], tid: str = "ab" * 16) -> list[SpanData]:
    return [SpanData(tid, f"{i + 1:016x}", s["name"], T0 + int(s["start_ms"] * 1e6), T0 + int(s["end_ms"] * 1e6),
                     attrs=s["attributes"]) for i, s in enumerate(fx["spans"])]


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_fixture_gives_its_record(engine: str) -> None:
    fx = fixture(engine)
    record = from_spans(engine, spans_of(fx))
    assert record is not None and record.source == "otlp" and record.engine == engine
    for field, value in fx["expect"].items():
        assert getattr(record, field) == pytest.approx(value, rel=1e-6, abs=1e-9), field
    assert complete(engine, spans_of(fx))


@pytest.mark.parametrize("engine", ENGINES)
def test_auto_picks_the_engine_that_reads_most(engine: str) -> None:
    record = best(tuple(ENGINE_SPANS), spans_of(fixture(engine)))
    assert record is not None
    expected = {k: v for k, v in fixture(engine)["expect"].items() if k.endswith("_s")}
    assert {k: getattr(record, k) for k in expected} == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("value", "unit", "want"), [
    ("53.209µs", "rust", 53.209e-6), ("1.208417ms", "rust", 1.208417e-3), ("2.5s", "rust", 2.5),
    ("345ns", "rust", 345e-9), ("12us", "rust", 12e-6), ("None", "rust", None), (0.5, "rust", None),
    (0.25, "s", 0.25), (250, "ms", 0.25), ("0.25", "s", None), (True, "s", None),
])
def test_seconds(value: Any, unit: str, want: float | None) -> None:
    got = seconds(value, unit)
    assert got == (None if want is None else pytest.approx(want))


def test_irrelevant_spans_are_not_relevant() -> None:
    assert not relevant(SpanData("ab" * 16, "01" * 8, "GET /health", 0, 1, attrs={"http.method": "GET"}))
    assert relevant(SpanData("ab" * 16, "01" * 8, "llm_request", 0, 1))
    assert relevant(SpanData("ab" * 16, "01" * 8, "x", 0, 1, attrs={"queue_time": "1ms"}))


def test_no_rule_matches_no_record() -> None:
    assert from_spans("vllm", [SpanData("ab" * 16, "01" * 8, "other", 0, 1)]) is None
    assert not complete("vllm", [SpanData("ab" * 16, "01" * 8, "other", 0, 1)])
