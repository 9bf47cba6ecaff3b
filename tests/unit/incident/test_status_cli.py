"""`sloguard status`: every SLO's lines plus its verdict, from a daemon's /api/v1/slos; exit codes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.story import Story, healthy, slow

from sloguard.incident.cli import main, render

VERDICT = {"stage": "queue", "cause": "capacity", "confidence": 0.92, "window": "5m", "lever": "add replicas",
           "summary": "p95 ttft 1.4s > 1s — queue: 92% of the ttft increase; 41 waiting → capacity: add replicas",
           "evidence_text": ["queue: 2.2s (baseline 0.005s (+2.2s, 92% of the ttft increase)) ✓ [request]"]}


def _doc(fault: bool) -> dict[str, Any]:
    story = Story()
    story.run(600, healthy)
    if fault:
        story.verdicts.verdict = VERDICT
        story.run(300, slow)
    return story.api()


DOC, CALM = _doc(True), _doc(False)


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
    assert text.startswith("✗ chat: BREACH, PAGE — latency burning")
    assert f"    why: {VERDICT['summary']}" in text and "      - queue: 2.2s (baseline" in text
    assert "why: none: every objective and stage budget holds over the last 5m" in render(CALM)


def test_exit_codes(daemon: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    url, state = daemon
    assert main(["--url", url]) == 1  # an SLO is in breach and pages
    assert "chat: BREACH, PAGE" in capsys.readouterr().out
    state["doc"] = CALM
    assert main(["--url", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["slos"][0]["incident"]["state"] == "OK"
    assert main(["--url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sloguard status: cannot read http://127.0.0.1:9/api/v1/slos:") and "Traceback" not in err


def test_url_without_a_scheme_and_the_configs_listen(daemon: tuple[str, dict[str, Any]], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 46 found 6: `--url 127.0.0.1:9490` failed with `unknown url type`; there was no `-c`."""
    url, _ = daemon
    port = url.rsplit(":", 1)[1]
    assert main(["--url", f"127.0.0.1:{port}"]) == 1
    assert "chat: BREACH, PAGE" in capsys.readouterr().out
    cfg = tmp_path / "sloguard.yaml"
    cfg.write_text(f'version: sloguard/v1\nlisten: ":{port}"\nstate_dir: {tmp_path / "state"}\n')
    assert main(["-c", str(cfg)]) == 1  # `:PORT` listens on every interface: read at the loopback
    assert "chat: BREACH, PAGE" in capsys.readouterr().out
    cfg.write_text("version: sloguard/v1\nlisten: 9478\n")
    assert main(["-c", str(cfg)]) == 2
    assert "listen" in capsys.readouterr().err
