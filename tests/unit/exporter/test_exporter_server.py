"""HTTP surface: readiness follows the first evaluation, reload reports failure, OpenMetrics on request."""

from __future__ import annotations

import asyncio
import threading

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.core import GaugeMetricFamily

from sloguard.exporter.server import CONTENT_TYPE_OM, CONTENT_TYPE_TEXT, Endpoints, build_app
from sloguard.snapshot import Snapshot
from sloguard.web.listen import parse_listen
from sloguard.web.webconfig import WebConfig


def test_endpoints() -> None:
    state = {"ready": False, "reload_ok": False}

    async def reload() -> bool:
        return state["reload_ok"]

    snap = Snapshot()
    g = GaugeMetricFamily("sloguard_x", "doc")
    g.add_metric([], 1)
    snap.put("a", [g])
    ep = Endpoints(snap, reload, lambda: state["ready"], {"slos": lambda: {"slos": []}}, lifecycle=True)

    async def scenario() -> None:
        async with TestClient(TestServer(build_app(ep, WebConfig(headers={"X-Frame-Options": "deny"})))) as c:
            assert (await c.get("/-/healthy")).status == 200
            assert (await c.get("/-/healthy")).headers["X-Frame-Options"] == "deny"
            assert (await c.get("/-/ready")).status == 503
            state["ready"] = True
            assert (await c.get("/-/ready")).status == 200
            assert (await c.post("/-/reload")).status == 500
            state["reload_ok"] = True
            assert (await c.post("/-/reload")).status == 200
            r = await c.get("/metrics")
            assert r.headers["Content-Type"] == CONTENT_TYPE_TEXT and "sloguard_x 1.0" in await r.text()
            r = await c.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
            assert r.headers["Content-Type"] == CONTENT_TYPE_OM and (await r.text()).endswith("# EOF\n")
            assert await (await c.get("/api/v1/slos")).json() == {"slos": []}
            assert (await c.get("/debug/alerts")).status == 404
            assert "/metrics" in await (await c.get("/")).text()

    asyncio.run(scenario())


def test_parse_listen() -> None:
    assert parse_listen(":9478") == ("0.0.0.0", 9478)
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:9478") == ("::1", 9478)


def test_ready_stays_200_and_says_why_when_degraded() -> None:
    reason = {"text": ""}

    async def reload() -> bool:
        return True

    ep = Endpoints(Snapshot(), reload, lambda: True, degraded=lambda: reason["text"])

    async def scenario() -> None:
        async with TestClient(TestServer(build_app(ep, WebConfig()))) as c:
            assert await (await c.get("/-/ready")).text() == "sloguard is ready.\n"
            reason["text"] = "state store /s/sloguard.db cannot be written (No space left on device)"
            r = await c.get("/-/ready")
            assert r.status == 200 and await r.text() == (
                "sloguard is ready (degraded: state store /s/sloguard.db cannot be written (No space left on "
                "device)).\n")
            assert (await c.get("/-/healthy")).status == 200

    asyncio.run(scenario())


class _HeldSnapshot(Snapshot):
    """A snapshot whose render waits until the test lets it finish, and counts the renders."""

    def __init__(self) -> None:
        super().__init__()
        self.started, self.release, self.renders = threading.Event(), threading.Event(), 0

    def render(self, openmetrics_format: bool = False) -> bytes:
        self.renders += 1
        self.started.set()
        assert self.release.wait(10)
        return super().render(openmetrics_format)


def test_a_slow_render_leaves_the_event_loop_free_and_runs_once_for_every_scrape_waiting() -> None:
    snap = _HeldSnapshot()
    g = GaugeMetricFamily("sloguard_x", "doc")
    g.add_metric([], 1)
    snap.put("a", [g])

    async def reload() -> bool:
        return True

    async def scenario() -> None:
        async with TestClient(TestServer(build_app(Endpoints(snap, reload, lambda: True), WebConfig()))) as c:
            scrapes = [asyncio.ensure_future(c.get("/metrics")) for _ in range(3)]
            assert await asyncio.to_thread(snap.started.wait, 10)
            assert (await c.get("/-/healthy")).status == 200  # answered while the render is held
            snap.release.set()
            bodies = [await (await s).text() for s in scrapes]
            assert all("sloguard_x 1.0" in b for b in bodies) and snap.renders == 1
            assert "sloguard_x 1.0" in await (await c.get("/metrics")).text() and snap.renders == 1  # cached
            snap.put("a", [g])
            assert "sloguard_x 1.0" in await (await c.get("/metrics")).text() and snap.renders == 2

    asyncio.run(scenario())
