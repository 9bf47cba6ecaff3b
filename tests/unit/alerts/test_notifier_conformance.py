"""One conformance test for every NOTIFIERS entry: retry classification, and no secret in errors, logs or /debug."""

from __future__ import annotations

import asyncio
import json
import random
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.slack_double import SlackDouble

from sloguard.alerts.notifiers import NOTIFIERS, DeliveryError
from sloguard.alerts.notifiers import slack as slack_mod
from sloguard.alerts.notifiers.base import http_error, transient
from sloguard.alerts.service import Alerting
from sloguard.clock import FakeClock
from sloguard.config.spec import Config
from sloguard.model import Sample
from sloguard.store import Store

SECRET_AM = "am-pass-s3cret-value"
SECRET_PATH = "hook-s3cret-path-value"
# case -> (fault kind, fault value, expected outcome: sent | retry | failed)
CASES: dict[str, tuple[str | None, Any, str]] = {
    "ok": (None, None, "sent"),
    "ratelimit": ("ratelimit", 7, "retry"),
    "server_error": ("status", 503, "retry"),
    "connection": (None, None, "retry"),
    "permanent": ("error", "channel_not_found", "failed"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def notifier_spec(kind: str, base: str, double: SlackDouble) -> tuple[dict[str, Any], str | None]:
    """Return (spec fields, secret) per NOTIFIERS type; a new type without an entry here fails the test."""
    table: dict[str, tuple[dict[str, Any], str | None]] = {
        "slack": ({"token_env": "SLACK_TOKEN", "channel": "#oncall", "api_url": f"{base}/api/"}, double.token),
        "alertmanager": ({"url": f"{base}/generic", "username": "sloguard", "password_env": "AM_PW"}, SECRET_AM),
        "webhook": ({"url_with_secret_env": "HOOK_URL"}, f"{base}/generic/{SECRET_PATH}"),
        "log": ({}, None),
        "console": ({}, None),
    }
    return table[kind]


@pytest.fixture(scope="module")
def double() -> Iterator[SlackDouble]:
    with SlackDouble() as d:
        yield d


@pytest.fixture(autouse=True)
def no_sdk_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK's own retry sleeps for real; classification is what is checked here (tests/e2e covers the retry).
    monkeypatch.setattr(slack_mod, "default_retry_handlers", list)


def build(kind: str, case: str, double: SlackDouble, tmp_path: Path) -> tuple[Alerting, str | None]:
    base = f"http://127.0.0.1:{free_port() if case == 'connection' else double.port}"
    fields, secret = notifier_spec(kind, base, double)
    spec = {"name": "n1", "type": kind, "group_wait": "0s", **fields}
    cfg = Config.model_validate({"version": "sloguard/v1", "builtin_alerts": False,
                                 "alerts": [{"name": "High", "expr": "m > 1", "summary": "{{ $value }}"}],
                                 "notifiers": [spec]})
    clock = FakeClock()
    secrets = {"n1": secret} if secret else {}
    return Alerting(cfg, Store(tmp_path / "s.db", clock), clock, secrets, rng=random.Random(0)), secret


def program(double: SlackDouble, kind: str, case: str) -> None:
    fault, value, _ = CASES[case]
    double.faults.clear()
    if case == "permanent" and kind != "slack":
        fault, value = "status", 400  # HTTP receivers reject bad requests with 4xx
    if fault is not None:
        double.fail_next(1, fault, value)


# The log notifier has no receiver that can fail: only its success case applies.
MATRIX = [(kind, case) for kind in sorted(NOTIFIERS) for case in CASES
          if case == "ok" or kind not in ("log", "console")]


@pytest.mark.parametrize(("kind", "case"), MATRIX)
def test_conformance(kind: str, case: str, double: SlackDouble, tmp_path: Path,
                     caplog: pytest.LogCaptureFixture) -> None:
    svc, secret = build(kind, case, double, tmp_path)
    program(double, kind, case)
    note_svc_calls = len(double.calls)
    svc.evaluate([Sample("m", {}, 5.0)], svc.clock.now())
    item = svc.outbox.take("n1", svc.clock.now())[0]
    error: DeliveryError | None = None
    try:
        asyncio.run(svc.notifiers["n1"].send(item.notification, item.ref))
    except DeliveryError as exc:
        error = exc
    expected = CASES[case][2]
    assert (error is None) == (expected == "sent")
    if error is not None:
        assert error.retryable == (expected == "retry")
        if case == "ratelimit":
            assert error.retry_after == 7
        svc.outbox.retry(item, str(error), svc.clock.now(), 3600) if error.retryable else \
            svc.outbox.fail(item, str(error), svc.clock.now())
    elif kind not in ("log", "console"):
        assert len(double.calls) > note_svc_calls and double.calls[-1]["ok"]
        if kind == "alertmanager":
            assert double.calls[-1]["path"] == "api/v2/alerts"
            assert double.calls[-1]["authorization"].startswith("Basic ")
            assert double.calls[-1]["json"][0]["labels"]["alertname"] == "High"
    if secret:
        shown = [str(error), caplog.text, json.dumps(svc.debug_json(), default=str)]
        assert not any(secret in text for text in shown)
        assert not any(SECRET_PATH in text or SECRET_AM in text for text in shown)


def test_slack_bot_updates_the_same_message_on_resolve(double: SlackDouble, tmp_path: Path) -> None:
    svc, _ = build("slack", "ok", double, tmp_path)
    double.faults.clear()
    svc.evaluate([Sample("m", {}, 5.0)], svc.clock.now())
    asyncio.run(svc.deliver_due())
    svc.clock.advance(600)  # type: ignore[attr-defined]
    svc.evaluate([], svc.clock.now())
    asyncio.run(svc.deliver_due())
    post, update = [c for c in double.calls if c["method"] in ("chat.postMessage", "chat.update")][-2:]
    assert post["method"] == "chat.postMessage" and update["method"] == "chat.update"
    assert update["ts"] == post["ts"] and double.messages[post["ts"]]["text"].startswith("RESOLVED: ")
    header = double.messages[post["ts"]]["blocks"][0]["text"]["text"]
    assert ":white_check_mark:" in header


def test_slack_webhook_mode_posts(double: SlackDouble, tmp_path: Path) -> None:
    cfg = Config.model_validate({"version": "sloguard/v1", "builtin_alerts": False,
                                 "alerts": [{"name": "High", "expr": "m > 1", "severity": "page"}],
                                 "notifiers": [{"name": "n1", "type": "slack", "webhook_url_env": "X",
                                                "group_wait": "0s"}]})
    clock = FakeClock()
    svc = Alerting(cfg, Store(tmp_path / "s.db", clock), clock, {"n1": double.webhook_url})
    double.faults.clear()
    before = len(double.posted())
    svc.evaluate([Sample("m", {}, 5.0)], clock.now())
    asyncio.run(svc.deliver_due())
    assert len(double.posted()) == before + 1 and double.posted()[-1]["method"] == "webhook"


# firing samples per evaluation (one per minute) -> (messages posted, messages left showing "firing")
@pytest.mark.parametrize(("steps", "posted", "left_firing"), [
    ([[("a", 5.0)], [("a", 5.0)], []], 2, 0),                       # repeat_interval re-post, then resolve
    ([[("a", 5.0)], [("a", 5.0), ("b", 5.0)], []], 2, 0),           # group change, then resolve
    ([[("a", 5.0)], [("a", 5.0)], [("a", 5.0)]], 3, 3),             # still firing: nothing updated
])
def test_slack_resolve_updates_every_open_message_of_the_group(
        double: SlackDouble, tmp_path: Path, steps: list[list[tuple[str, float]]], posted: int,
        left_firing: int) -> None:
    cfg = Config.model_validate({"version": "sloguard/v1", "builtin_alerts": False,
                                 "alerts": [{"name": "High", "expr": "m > 1", "summary": "{{ $value }}"}],
                                 "notifiers": [{"name": "n1", "type": "slack", "group_wait": "0s",
                                                "group_interval": "1m", "repeat_interval": "1m",
                                                **notifier_spec("slack", f"http://127.0.0.1:{double.port}",
                                                                double)[0]}]})
    clock = FakeClock()
    svc = Alerting(cfg, Store(tmp_path / "s.db", clock), clock, {"n1": double.token})
    double.faults.clear()
    before = set(double.messages)
    for firing in steps:
        svc.evaluate([Sample("m", {"inst": inst}, v) for inst, v in firing], clock.now())
        asyncio.run(svc.deliver_due())
        clock.advance(60)
    mine = [m for ts, m in double.messages.items() if ts not in before]
    assert len(mine) == posted
    assert sum(not m["text"].startswith("RESOLVED: ") for m in mine) == left_firing


@pytest.mark.parametrize(("error", "ambiguous"), [
    (transient(ConnectionRefusedError(111, "refused"), []), False),    # never sent
    (transient(TimeoutError(), []), True),                             # sent, no answer in time
    (transient(aiohttp.ServerDisconnectedError(), []), True),          # dropped after sending
    (http_error(503, "x", None), True),
    (http_error(429, "x", "3"), False),
    (http_error(400, "x", None), False),
])
def test_ambiguous_failures_are_marked(error: DeliveryError | None, ambiguous: bool) -> None:
    assert error is not None and error.ambiguous is ambiguous
