"""One incident, one story: the terminal, the status page, Slack, the API and /metrics say the same thing.

Each case runs the daemon's evaluation path (tests/support/story.py) through a healthy spell and a fault, then
renders every surface from what the daemon would serve and compares them with the incident model and with each
other: state, severity, burn and budget left (the same digits), breaches, the "where / why" line.
"""

from __future__ import annotations

import html.parser
import re
from collections import Counter
from typing import Any

import pytest
from support.story import Story, healthy, http_503, slow, timeout

from sloguard import escape
from sloguard.alerts.notifiers import slack
from sloguard.exporter.landing import LandingInput
from sloguard.exporter.landing import render as landing
from sloguard.incident import text
from sloguard.incident.cli import render as status_render
from sloguard.incident.cli import troubled
from sloguard.incident.text import burn_text

VERDICT = {"cause": "capacity", "stage": "queue", "confidence": 0.9, "lever": "add replicas or lower max concurrency",
           "summary": "p95 ttft 1.4s > 1s — queue: 80% of the ttft increase; 41 waiting → capacity: add replicas",
           "evidence_text": ["requests_waiting: 41 waiting (baseline 0) ✓"]}


class _Text(html.parser.HTMLParser):
    """The page's visible text (not its stylesheet or title)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.hidden += tag in ("style", "title")

    def handle_endtag(self, tag: str) -> None:
        self.hidden -= tag in ("style", "title")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def _page_text(story: Story) -> str:
    page = landing(LandingInput(version="t", ready=True, now=story.clock.now(), slos=story.api()))
    parser = _Text()
    parser.feed(page)
    return " ".join(" ".join(parser.parts).split())


def _slack_text(note: Any) -> str:
    blocks = slack.blocks(note)
    parts: list[str] = []
    for b in blocks:
        parts += [str(b.get("text", {}).get("text", ""))] + [str(f["text"]) for f in b.get("fields", [])]
        parts += [str(e.get("text", "")) for e in b.get("elements", [])]
    return "\n".join(parts)


def _run(fault: Any, verdict: dict[str, Any] | None) -> Story:
    story = Story()
    story.run(600, healthy)
    if verdict is not None:
        story.verdicts.verdict = verdict
    story.run(300, fault)
    return story


@pytest.mark.parametrize(("fault", "verdict", "sli", "why"), [
    (slow, VERDICT, "latency", VERDICT["summary"]),
    (http_503, None, "availability", "failures over 5m: 150 HTTP 503"),
    (timeout, None, "availability", "failures over 5m: 150 timeout"),
])
def test_every_surface_tells_the_same_story(fault: Any, verdict: dict[str, Any] | None, sli: str, why: str) -> None:
    story = _run(fault, verdict)
    view = story.view()
    lead = next(s for s in view["slis"] if s["sli"] == sli)
    assert view["state"] == "BREACH" and view["severity"] == "page" and lead["severity"] == "page"
    assert view["why"]["text"].startswith(why)
    phrase = burn_text(lead, view["slo_window"])  # "latency burning 20x over 5m, 93.06% of the 1d budget left"
    terminal, page = status_render(story.api()), _page_text(story)
    for surface in (terminal, page):
        assert phrase in surface and why in surface and "PAGE" in surface
        assert all(b["text"] in surface for b in view["breaches"])
    page_alert = next(a for a in story.active.values()
                      if dict(a.labels)["severity"] == "page" and dict(a.labels)["sli"] == sli)
    assert f"burning {page_alert.value:.3g}x" in phrase  # the alert's $value is the burn the model shows
    # Slack: each message says what the model said when it was sent (burn, budget left, where / why)
    (note, then), = [(n, v) for n, v in story.told if dict(n.alerts[0].labels)["sli"] == sli]
    told = next(s for s in then["slis"] if s["sli"] == sli)
    chat = _slack_text(note)
    assert f"PAGE: SLO chat {sli} budget burning {told['burn']:.3g}x" in chat
    left = re.search(r"([\d.]+%) of the 1d budget left", burn_text(told, then["slo_window"]))
    assert left is not None and f"{left.group(1)} of the 1d budget left" in chat
    assert f"Where / why:* {escape.slack(then['why']['text'])}" in chat  # mrkdwn: `>` is sent as `&gt;`
    # /metrics: the state series says what the page says
    state = next(s for f in story.incidents.families() for s in f.samples)
    assert state.labels == {"slo": "chat", "state": "BREACH", "severity": "page"}
    assert troubled(story.api())


def test_at_most_one_page_and_one_ticket_per_slo_and_sli() -> None:
    story = _run(http_503, None)
    per = Counter((dict(a.labels)["slo"], dict(a.labels).get("sli"), dict(a.labels)["severity"])
                  for a in story.active.values() if a.state == "firing")
    assert per and max(per.values()) == 1
    sent = Counter((dict(a.labels)["sli"], dict(a.labels)["severity"]) for n in story.sent for a in n.alerts)
    assert sent[("availability", "page")] == 1 and sent[("availability", "ticket")] == 0  # held by its page


def test_a_healthy_run_pages_nothing_and_shows_no_breach() -> None:
    story = Story()
    story.run(1200, healthy)
    view = story.view()
    assert view["state"] == "OK" and view["severity"] == "" and not story.sent
    for surface in (status_render(story.api()), _page_text(story)):
        assert "BREACH" not in surface and "PAGE" not in surface
    assert not troubled(story.api())


def test_learning_is_said_everywhere_until_a_cause_can_be_named() -> None:
    story = Story()
    story.verdicts.learning_s = 240.0
    story.run(60, healthy)
    assert story.view()["why"]["text"] == "diagnosis learning baselines: ready in ~4 min"
    assert "ready in ~4 min" in status_render(story.api()) and "ready in ~4 min" in _page_text(story)
    story.verdicts.verdict = VERDICT  # a cause that needs no baseline is named at once
    story.run(10, slow)
    assert story.view()["why"]["kind"] == "verdict"


def test_the_worst_stage_is_judged_over_the_window_shown() -> None:
    """A stage over budget an hour ago but not over the last 5 minutes is not 'most over budget'."""
    story = Story()
    story.run(300, slow)
    story.run(900, healthy)
    view = story.view()
    assert view["worst_stage"] is None and view["state"] == "OK"
    assert "most over budget" not in text.render(story.api()["slos"])


def test_stage_values_never_exceed_their_whole_as_shown() -> None:
    story = _run(slow, VERDICT)
    view = story.view()
    ttft = next(b["value"] for b in view["breaches"] if b["name"] == "ttft" and b["kind"] == "objective")
    assert all(s["p95"] <= ttft for s in view["stages"] if s["stage"] in ("queue", "prefill", "network"))


def _page_notes(story: Story) -> list[str]:
    return [n.status for n in story.sent
            if any(dict(a.labels)["sli"] == "availability" and dict(a.labels)["severity"] == "page" for a in n.alerts)]


def test_a_fault_that_returns_within_the_hold_is_one_page() -> None:
    """A burn that stops and starts again within its short window (1 min here) is one page, one resolve (issue 46)."""
    story = _run(http_503, None)
    assert _page_notes(story) == ["firing"]
    story.run(80, healthy)  # the 1 min short window has cleared: no row holds, the page is kept
    lead = next(s for s in story.view()["slis"] if s["sli"] == "availability")
    assert lead["severity"] == "page" and lead["cleared_at"] is not None
    assert not [r for r in lead["rows"] if "(page above" in r]  # what still holds is the ticket rows
    for surface in (status_render(story.api()), _page_text(story)):
        assert "kept firing one short window" in surface
    story.run(40, http_503)  # the fault comes back: the rows hold again within the hold
    assert next(s for s in story.view()["slis"] if s["sli"] == "availability")["cleared_at"] is None
    story.run(300, healthy)
    assert _page_notes(story) == ["firing", "resolved"]
    assert story.view()["severity"] != "page"
