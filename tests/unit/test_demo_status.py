"""The demo's status lines (the incident model's terminal text) say what pages, why, and what budget is left."""

from __future__ import annotations

from support.story import Story, healthy, result

from sloguard.incident import text


def test_status_shows_the_page_its_rows_and_the_budget_left() -> None:
    story = Story()
    story.run(600, healthy)
    story.run(240, lambda ts: result(ts, ttft_s=1.3, e2e_s=2.0, elapsed_s=2.0))
    lines = text.render(story.api()["slos"]).splitlines()
    assert lines[0].startswith("✗ chat: BREACH, PAGE — latency burning 16x over 5m, ")
    assert any(line.strip().startswith("PAGE") and "[latency 5m/1m: 16x (page above 14.4x)" in line for line in lines)
    assert any("availability burning 0x over 5m, 100% of the 1d budget left" in line for line in lines)


def test_status_before_any_data() -> None:
    assert text.render([]) == "(waiting for the first evaluation)"
