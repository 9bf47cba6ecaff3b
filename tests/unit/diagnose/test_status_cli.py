"""`sloguard status`: every SLO's lines plus its verdict, from a daemon's /api/v1/slos; exit codes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sloguard.diagnose.status_cli import main, render
from sloguard.slo.status import render_status

VERDICT = {"stage": "queue", "cause": "capacity", "confidence": 0.92, "window": "5m",
           "summary": "p95 ttft 2.4s > 1s — queue: 92% of the ttft increase; 41 waiting → capacity: add replicas",
           "evidence_text": ["queue: 2.2s (baseline 0.005s (+2.2s, 92% of the ttft increase)) ✓ [request]"]}
DOC: dict[str, Any] = {"slos": [
    {"name": "chat", "source": "probe", "target": "t", "objectives": [], "windows": [], "stages": [],
     "diagnosis": VERDICT},
    {"name": "batch", "source": "probe", "target": "t", "objectives": [], "windows": [], "stages": [],
     "diagnosis": {"stage": "none", "cause": "none", "confidence": 1.0, "window": "5m", "summary": ""}},
]}


@pytest.fixture
def daemon() -> Iterator[tuple[str, dict[str, Any]]]:
    state: dict[str, Any] = {"doc": DOC}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(state["doc"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()


def test_render_shows_each_verdict_with_its_evidence() -> None:
    text = render(DOC)
    assert "diagnosis: p95 ttft 2.4s > 1s — queue: 92% of the ttft increase; 41 waiting → capacity: add replicas " \
           "(confidence 92.0%)" in text and text.count("diagnosis: p95") == 1
    assert "- queue: 2.2s (baseline" in text and "diagnosis: none (no objective breached over the last 5m)" in text
    assert "diagnosis: p95 ttft 2.4s > 1s" in render_status(DOC)  # the demo, evaluate and the landing page too


def test_exit_codes(daemon: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    url, state = daemon
    assert main(["--url", url]) == 1  # an SLO has a verdict
    assert "SLO chat" in capsys.readouterr().out
    state["doc"] = {"slos": [DOC["slos"][1]]}
    assert main(["--url", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["slos"][0]["diagnosis"]["cause"] == "none"
    assert main(["--url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sloguard status: cannot read http://127.0.0.1:9/api/v1/slos:") and "Traceback" not in err
