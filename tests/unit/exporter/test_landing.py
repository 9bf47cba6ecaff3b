"""The landing page: SLO states, source health, alerts, probes and links; escaped; renders with broken providers."""

from __future__ import annotations

import asyncio
import html.parser
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from support.story import Story, healthy, slow

from sloguard.exporter.landing import LandingInput, gather, render
from sloguard.exporter.server import Endpoints, build_app
from sloguard.model import Sample
from sloguard.snapshot import Snapshot
from sloguard.web.webconfig import WebConfig

NOW = 1_800_000_000.0
SLOS = {"slos": [
    {"name": "chat", "source": "probe", "target": "gw", "window": "1d", "goodput_target": 0.95,
     "runbook_url": "https://runbooks.example/chat?a=1&b=2",
     "objectives": [{"metric": "ttft", "percentile": 95, "threshold": 0.5, "window": w, "segment": "",
                     "value": v, "compliant": v < 0.5} for w, v in (("5m", 0.9), ("1h", 0.3), ("1d", 0.2))],
     "windows": [{"window": "5m", "segment": "", "requests": 20, "goodput_ratio": 0.7, "burn_rate": 6.0}],
     "error_budget_remaining": 0.5},
    {"name": "srv", "source": "server", "target": "gw", "window": "28d",
     "objectives": [{"metric": "queue", "percentile": 99, "threshold": 0.1, "window": "5m", "segment": "",
                     "value": 0.01, "compliant": True}]},
    {"name": "new", "source": "probe", "target": "gw", "objectives": [], "windows": []},
]}
ALERTS = {"active": [{"labels": [["alertname", "HighTTFT"], ["slo", "chat"]], "annotations": [["summary", "p95 <b>"]],
                      "state": "firing", "active_at": NOW - 120, "fired_at": NOW - 60}],
          "outbox": {"waiting": [{"id": 1}], "dead": []}}
PROBES = [{"probe": "p1", "target": "gw", "ok": False, "ts": NOW - 3, "ttft_s": None, "e2e_s": None,
           "error": "connect: refused <script>"},
          {"probe": "p1", "target": "gw", "ok": True, "ts": NOW - 5, "ttft_s": 0.2, "e2e_s": 0.9, "error": None}]
SAMPLES = [Sample("sloguard_source_up", (("source", "scrape"), ("target", "gw")), 1.0),
           Sample("sloguard_source_last_success_timestamp_seconds", (("source", "scrape"), ("target", "gw")), NOW - 4),
           Sample("sloguard_source_up", (("source", "scrape"), ("target", "<dead>")), 0.0),
           Sample("sloguard_source_failures_total", (("reason", "connect"), ("source", "scrape"),
                                                     ("target", "<dead>")), 7.0)]


class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _page(**kw: Any) -> tuple[str, str, list[str]]:
    page = render(LandingInput(**{"version": "9.9", "ready": True, "now": NOW, "slos": SLOS, "alerts": ALERTS,
                                  "probes": PROBES, "samples": SAMPLES, **kw}))
    parser = _Text()
    parser.feed(page)
    return page, " ".join(" ".join(parser.parts).split()), parser.tags


def test_every_slo_has_a_row_with_its_state_and_percentages() -> None:
    page, text, _ = _page()
    assert "SLOs (3 no data)" in text  # no incident model yet: nothing is judged
    assert "no data SLO chat (probe, target gw)" in text and "no data SLO srv (server, target gw)" in text
    assert "goodput >= 95.0% 70.0% BREACH" in text and "0.95" not in text  # the per-window detail
    assert "p95 ttft <= 500ms 900ms BREACH 300ms OK 200ms OK" in text  # 5m, 1h and the SLO's own 1d window
    assert 'href="https://runbooks.example/chat?a=1&amp;b=2"' in page


def test_the_first_screen_is_one_line_per_slo_from_the_incident_model() -> None:
    story = Story()
    story.run(600, healthy)
    story.verdicts.verdict = {"cause": "capacity", "stage": "queue", "lever": "add replicas", "confidence": 0.9,
                              "summary": "queue: 80% of the ttft increase → capacity: add replicas"}
    story.run(300, slow)
    page, text, _ = _page(slos=story.api())
    board = page[page.index('<table class="board">'):page.index("</table>", page.index('<table class="board">'))]
    assert board.count("<tr>") == 2  # header + one SLO, before any detail
    assert 'class="sev page">PAGE · BREACH<' in board and "→ add replicas" in board
    assert "SLOs (1 PAGE, 1 BREACH)" in text
    assert "timeline:" in text and "page SloguardErrorBudgetBurn (latency) fired" in text


def test_sources_alerts_probes_and_links() -> None:
    _, text, _ = _page()
    assert "scrape gw OK 4s ago -" in text
    assert "scrape <dead> DOWN never connect 7" in text
    assert "HighTTFT firing 60s ago p95 <b> slo=chat" in text
    assert "notification outbox: 1 waiting, 0 given up" in text
    assert "p1 gw FAILED 3s ago no data no data connect: refused <script>" in text
    assert "p1 gw OK 5s ago 200ms 900ms" in text
    for path in ("/metrics", "/api/v1/slos", "/debug/probes", "/debug/alerts", "/-/healthy", "/-/ready"):
        assert path in text


def test_untrusted_text_is_escaped_and_there_is_no_script() -> None:
    page, _, tags = _page()
    assert "<script>" not in page and "<b>" not in page and "&lt;dead&gt;" in page
    assert "script" not in tags


def test_empty_daemon_renders_placeholders() -> None:
    _, text, _ = _page(slos={}, alerts={}, probes=[], samples=[], ready=False)
    assert "not ready (first evaluation pending)" in text and "no SLOs configured" in text
    assert "no source has run yet" in text and "no pending or firing alerts" in text
    assert "no probe results yet" in text


def test_broken_or_missing_providers_render_as_empty() -> None:
    def boom() -> Any:
        raise RuntimeError("provider broke")

    data = gather("1", True, {"slos": boom, "alerts": lambda: ["wrong type"]}, [], now=NOW)
    assert (data.slos, data.alerts, data.probes) == ({}, {}, [])
    assert "no SLOs configured" in render(data)


def test_served_at_root_as_utf8_html() -> None:
    snap = Snapshot()

    async def reload() -> bool:
        return True

    ep = Endpoints(snap, reload, lambda: True, {"slos": lambda: SLOS, "alerts": lambda: ALERTS,
                                                "probes": lambda: PROBES})

    async def scenario() -> None:
        async with TestClient(TestServer(build_app(ep, WebConfig()))) as c:
            r = await c.get("/")
            assert r.status == 200 and r.headers["Content-Type"] == "text/html; charset=utf-8"
            body = await r.text()
            assert "SLO chat (probe, target gw)" in body and "HighTTFT" in body

    asyncio.run(scenario())
