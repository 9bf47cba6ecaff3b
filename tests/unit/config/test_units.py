"""Duration strings parse to seconds and format back exactly."""

from __future__ import annotations

import pytest

from sloguard.config.units import format_duration, parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("250ms", 0.25), ("30s", 30.0), ("5m", 300.0), ("1h30m", 5400.0), ("28d", 2419200.0), ("1w", 604800.0),
    ("1.5s", 1.5), ("0s", 0.0), ("1y", 31536000.0),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "5 m", "m5", "-1s", "5min", "1h 30m", "ms"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(("seconds", "text"), [
    (300.0, "5m"), (1800.0, "30m"), (3600.0, "1h"), (7200.0, "2h"), (21600.0, "6h"), (86400.0, "1d"),
    (259200.0, "3d"), (2419200.0, "28d"), (0.25, "250ms"), (60.0, "1m"), (90.0, "90s"),
])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds)
