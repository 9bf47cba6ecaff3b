"""Reading a server's identity over real HTTP, and what the daemon exports and posts about releases."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sloguard.alerts.notifiers.base import one_line
from sloguard.alerts.routing import Notification
from sloguard.config.spec import Config
from sloguard.reports.identity import UNSEEN, IdentitySource, Observed
from sloguard.reports.message import report_alert
from sloguard.reports.releases import Boundary
from sloguard.reports.service import ReleaseReports
from sloguard.sources.base import SourceError


def server(routes: dict[str, Any]) -> TestServer:
    app = web.Application()
    for path, body in routes.items():
        async def handler(_: web.Request, body: Any = body) -> web.Response:
            return body if isinstance(body, web.Response) else web.json_response(body)
        app.router.add_get(path, handler)
    return TestServer(app)


def collect(routes: dict[str, Any], engine: str) -> Observed:
    async def go() -> Observed:
        async with server(routes) as srv:
            src = IdentitySource("t", str(srv.make_url("/v1")), engine, "key", 60.0)
            try:
                out = await src.collect()
            finally:
                await src.close()
            assert isinstance(out.payload, Observed)
            return out.payload
    return asyncio.run(go())


MODELS = {"/v1/models": {"data": [{"id": "m2"}, {"id": "m1"}]}}


@pytest.mark.parametrize(("routes", "engine", "version"), [
    ({"/version": {"version": "0.11.0"}, **MODELS}, "vllm", "0.11.0"),
    ({"/version": {"version": "0.11.0"}, **MODELS}, "auto", "0.11.0"),
    ({"/props": {"build_info": "b6710"}, **MODELS}, "auto", "b6710"),  # llama.cpp found by trying each
    ({**MODELS}, "vllm", None),  # 404: this server exposes none
    ({**MODELS}, "openai", None),  # an engine without a version endpoint
    ({"/version": web.Response(status=503), **MODELS}, "vllm", UNSEEN),  # failed: keep what was known
])
def test_identity_is_read_not_typed(routes: dict[str, Any], engine: str, version: object) -> None:
    seen = collect(routes, engine)
    assert seen.engine_version == version and seen.models == ["m2", "m1"]


def test_a_server_that_answers_nothing_is_a_failed_collection() -> None:
    with pytest.raises(SourceError, match="neither the version endpoint nor /v1/models"):
        collect({"/version": web.Response(status=500), "/v1/models": web.Response(status=500)}, "vllm")


DOC = {"verdict": "regression", "counts": {"regression": 2, "improvement": 0, "no significant change": 5,
                                          "not enough data": 3},
       "baseline": {"requests": 300}, "candidate": {"requests": 280},
       "top_changes": [{"metric": "ttft", "stat": "p95", "scope": "overall", "kind": "latency", "scale": "relative",
                        "base": 0.2, "cand": 0.3, "delta": 0.5, "ci": [0.3, 0.7], "verdict": "regression",
                        "base_censored": False, "cand_censored": False}],
       "cells": []}


def test_the_message_has_verdict_top_changes_with_intervals_and_the_path() -> None:
    b = Boundary(7, "chat", 1000.0, "aaaa1111", "bbbb2222", "done", "regression", "/var/lib/sloguard/reports/x")
    alert = report_alert(b, DOC, {"labels": {"release": "v1"}}, {"labels": {"release": "v2"}})
    note = Notification("slack", "k", "firing", (), (alert,), 0.0)
    assert one_line(note) == "Release report chat: v1 → v2: REGRESSION"
    text = dict(alert.annotations)["description"]
    assert "p95 TTFT: 200.0 ms → 300.0 ms, +50.0 % [+30.0 %, +70.0 %] (regression)" in text
    assert "Full report: /var/lib/sloguard/reports/x/report.html" in text
    assert dict(alert.labels) == {"alertname": "SloguardReleaseReport", "target": "chat", "severity": "warning",
                                  "verdict": "regression", "boundary": "7"}


class _Persist:
    def __init__(self) -> None:
        self.conn, self.lock = sqlite3.connect(":memory:"), threading.RLock()


def test_release_info_and_verdicts_are_exported() -> None:
    cfg = Config.model_validate({"version": "sloguard/v1", "targets": [
        {"name": "chat", "engine": "vllm", "api_url": "http://x", "labels": {"release": "v2", "team": "ml"}}]})
    svc = ReleaseReports(cfg, "cfg.yaml", _Persist(), None, 0.0, lambda *a: 0)
    svc.on_output(Observed("chat", "0.11.0", ["m"]), 1.0)
    b = Boundary(1, "chat", 1.0, "a", "b", "done", "regression", "/x")
    svc._remember(b, {"verdict": "regression", "cells": [
        {"metric": "ttft", "stat": "p95", "scope": "overall", "family": True, "verdict": "regression"},
        {"metric": "tpot", "stat": "p99", "scope": "overall", "family": True, "verdict": "not enough data"}]})
    fams = {f.name: f for f in svc.families()}
    (info,) = fams["sloguard_release_info"].samples
    assert info.labels == {"target": "chat", "engine": "vllm", "engine_version": "0.11.0", "model": "m",
                           "release_id": svc.releases.identity("chat").release_id,  # type: ignore[union-attr]
                           "label_release": "v2", "label_team": "ml"}
    verdicts = {(s.labels["metric"], s.labels["stat"]): s.value for s in fams["sloguard_report_verdict"].samples}
    assert verdicts == {("report", ""): 1.0, ("ttft", "p95"): 1.0}  # not enough data: absent
