"""Scrape limits: each hostile page is rejected whole with its limit's name; 0 disables a limit."""

from __future__ import annotations

import pytest
from support import hostile

from sloguard.config.spec import TargetSpec
from sloguard.sources.base import SourceError
from sloguard.sources.limits import ScrapeLimits, digest, exported_series
from sloguard.sources.parse import LimitExceeded, ParseLimits, parse_text

SPEC = TargetSpec(name="t", engine="auto", metrics_url="http://127.0.0.1:1/metrics")
SMALL = ScrapeLimits(samples=1_000, labels=8, label_value_length=64, series=200)

CASES = [
    ("cardinality bomb", hostile.cardinality_bomb(5_000), "sample_limit"),
    ("big page", hostile.big_page(2_000), "sample_limit"),
    ("long label value", hostile.long_label_value(65), "label_value_length_limit"),
    ("many labels", hostile.many_labels(8), "label_limit"),  # model_name + 8 = 9 labels
    ("many models", hostile.many_models(30), "series_limit"),
    ("many reasons", hostile.many_reasons(200), "series_limit"),
]


@pytest.mark.parametrize(("page", "reason"), [(p, r) for _, p, r in CASES], ids=[c[0] for c in CASES])
def test_page_over_a_limit_is_rejected_with_its_name(page: str, reason: str) -> None:
    with pytest.raises(SourceError) as info:
        digest(page, SPEC, 0.0, SMALL)
    assert info.value.reason == reason


@pytest.mark.parametrize(("page", "reason"), [(p, r) for _, p, r in CASES], ids=[c[0] for c in CASES])
def test_zero_disables_every_limit(page: str, reason: str) -> None:
    out = digest(page, SPEC, 0.0, ScrapeLimits(0, 0, 0, 0))
    assert out.view.engine == "vllm" and out.samples > 0


def test_pages_at_the_limits_pass() -> None:
    assert digest(hostile.long_label_value(64), SPEC, 0.0, SMALL).view.models
    assert digest(hostile.many_labels(7), SPEC, 0.0, SMALL).view.models
    exact = hostile.healthy() + "".join(f"x{i} 1\n" for i in range(1_000 - 8))  # healthy() has 8 samples
    assert digest(exact, SPEC, 0.0, SMALL).samples == 1_000


def test_sample_limit_stops_the_parse_at_the_first_sample_over() -> None:
    page = hostile.cardinality_bomb(300_000)
    with pytest.raises(LimitExceeded) as info:
        parse_text(page, ParseLimits(samples=50_000))
    assert info.value.reason == "sample_limit"
    assert "(line 50002)" in str(info.value)  # line 1 is the TYPE comment: the 50,001st sample stops it


def test_label_checks_see_escaped_values_and_equals_signs_in_values() -> None:
    esc = 'vllm:num_requests_running{model_name="a\\"' + "b" * 70 + '"} 1\n'
    with pytest.raises(LimitExceeded, match=r"label \w+ is \d+ characters"):
        parse_text(esc, ParseLimits(label_value_length=64))
    many_eq = 'x{a="=====",b="==="} 1\n'
    assert parse_text(many_eq, ParseLimits(labels=2))[0].labels == {"a": "=====", "b": "==="}


def test_exported_series_counts_windows_quantiles_and_reasons() -> None:
    view = digest(hostile.healthy(), SPEC, 0.0, SMALL).view
    # 1 histogram x (4 quantiles + mean) x 2 windows + 3 gauges + 1 counter x 2 windows
    assert exported_series(view) == 10 + 3 + 2


def test_defaults_are_prometheus_like() -> None:
    assert ScrapeLimits.of(SPEC) == ScrapeLimits(50_000, 64, 1024, 5_000)
