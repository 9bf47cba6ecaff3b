"""A service's worst replicas: one field of the incident model, the same line on every surface.

A server SLO over three replicas (tests/support/story.py with server windows): the replicas that carry the bad
requests are named worst first, with their share and their own quantile; the diagnosis's replica_outlier evidence
adds what it saw; the terminal, the status page, the API and the page's annotations show the model's line.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from support.story import Story, healthy

from sloguard.exporter.landing import LandingInput
from sloguard.exporter.landing import render as landing
from sloguard.incident.cli import render as status_render
from sloguard.incident.replicas import outliers
from sloguard.incident.text import replicas_text
from sloguard.model import Histogram, ModelView, ServerView
from sloguard.windows.server import ServerWindows

CONFIG = """\
version: sloguard/v1
services:
  - {name: chat, engine: vllm, api_url: "http://127.0.0.1:1", replicas: [
      {name: r0, metrics_url: "http://127.0.0.1:1/m"}, {name: r1, metrics_url: "http://127.0.0.1:2/m"},
      {name: r2, metrics_url: "http://127.0.0.1:3/m"}]}
slos:
  - {name: chat-server, target: chat, source: server, error_budget_window: 1d,
     objectives: [{metric: ttft, percentile: 95, threshold: 500ms}]}
notifiers:
  - {name: oncall, type: webhook, url: "http://127.0.0.1:1/hook", group_wait: 10s}
"""
BOUNDS = (0.1, 0.5, 1.0, math.inf)
OUTLIER = {"cause": "replica_outlier", "stage": "none", "summary": "replica r1 is the problem", "evidence": [
    {"signal": "replica_outliers", "value": 1.0, "compared": "≥ 1", "holds": True,
     "detail": "replica r1 of 3: decode mean 310 ms vs 95 ms (median of the others), restarted 1x"}]}


class Fleet:
    """Three replicas' cumulative TTFT histograms: each serves 20 requests per 10 s, `slow[r]` of them at 0.8 s."""

    def __init__(self) -> None:
        self.counts = {r: [0.0] * len(BOUNDS) for r in ("r0", "r1", "r2")}

    def serve(self, story: Story, seconds: float, slow: dict[str, int]) -> None:
        assert story.server is not None
        for _ in range(int(seconds // 10)):
            story.clock.advance(10)
            for r, c in self.counts.items():
                bad = slow.get(r, 0)
                for i, b in enumerate(BOUNDS):
                    c[i] += (20 - bad) + (bad if b >= 0.8 else 0)
                h = Histogram(tuple(zip(BOUNDS, c, strict=True)), c[-1], 0.0)
                story.server.add(ServerView("chat", "vllm", story.clock.now(),
                                            {"m": ModelView("m", histograms={"ttft": h})}, replica=r))
            story.step()


def _story(slow: dict[str, int], verdict: dict[str, Any] | None = None) -> Story:
    story = Story(CONFIG, server=ServerWindows(max_age=86400))
    fleet = Fleet()
    fleet.serve(story, 600, {})
    if verdict is not None:
        story.verdicts.verdict = verdict
    fleet.serve(story, 900, slow)  # the 10m/1m page row's long window all in the fault
    return story


def _page(story: Story) -> str:
    return landing(LandingInput(version="t", ready=True, now=story.clock.now(), slos=story.api()))


@pytest.mark.parametrize(("slow", "expected"), [
    ({"r1": 20}, ["r1: 100% of the bad requests (600 of its 600), ttft p95 975ms > 500ms"]),
    ({"r1": 20, "r2": 10}, ["r1: 67% of the bad requests (600 of its 600), ttft p95 975ms > 500ms",
                            "r2: 33% of the bad requests (300 of its 600), ttft p95 950ms > 500ms"]),
    ({}, []),  # nothing spends the budget: no replica is named
])
def test_the_replicas_that_spend_the_budget_are_named_worst_first(slow: dict[str, int], expected: list[str]) -> None:
    story = _story(slow)
    view = story.view("chat-server")
    assert [r["text"] for r in view["replicas"]] == expected
    line = replicas_text(view)
    if not expected:
        assert line == "" and "worst replicas" not in status_render(story.api())
        return
    assert line.startswith("worst replicas over 5m: r1: ")
    for surface in (status_render(story.api()), _page(story)):  # the terminal and the status page: one line
        assert line in surface.replace("&gt;", ">")
    api = next(s for s in story.api()["slos"] if s["name"] == "chat-server")
    assert api["incident"]["replicas"][0]["name"] == "r1"  # /api/v1/slos
    page = next(a for a in story.active.values() if dict(a.labels).get("severity") == "page")
    assert dict(page.annotations)["worst_replicas"] == "\n".join(expected)  # what notifications carry


def test_the_diagnosis_names_what_it_saw_of_a_replica() -> None:
    story = _story({"r1": 20}, OUTLIER)
    [r1] = story.view("chat-server")["replicas"]
    assert r1["outlier"] == "decode mean 310 ms vs 95 ms (median of the others), restarted 1x"
    assert r1["text"].endswith("; decode mean 310 ms vs 95 ms (median of the others), restarted 1x")


def test_a_probe_slo_names_the_outlier_the_diagnosis_found() -> None:
    story = Story()
    story.verdicts.verdict = OUTLIER
    story.run(120, healthy)
    assert [r["text"] for r in story.view()["replicas"]] == [
        "r1: decode mean 310 ms vs 95 ms (median of the others), restarted 1x"]


@pytest.mark.parametrize(("detail", "expected"), [
    ("replica a-0 of 8: KV cache 0.97 vs 0.3 (median of the others); replica b of 8: restarted 2x",
     {"a-0": "KV cache 0.97 vs 0.3 (median of the others)", "b": "restarted 2x"}),
    ("replica pod of 10 of 12: waiting 4 vs 0 (median of the others)",
     {"pod of 10": "waiting 4 vs 0 (median of the others)"}),
    ("garbage", {}),
])
def test_outlier_evidence_is_read_per_replica(detail: str, expected: dict[str, str]) -> None:
    assert outliers({"evidence": [{"signal": "replica_outliers", "detail": detail}]}) == expected
