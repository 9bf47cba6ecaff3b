"""A local HTTP server that behaves like Slack's Web API and incoming webhooks, for the real slack-sdk client."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Fault:
    """One programmed answer: kind is 'ratelimit', 'status', 'error' or 'slow'."""

    kind: str
    value: Any = None


@dataclass
class SlackDouble:
    """Serve Slack `/api/<method>`, `/webhook/<secret>` and a generic JSON `/generic/...` on 127.0.0.1:0 in a thread."""

    token: str = "xoxb-test-double-token-123456"
    webhook_path: str = "T000/B000/secret-webhook-path"
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)  # ts -> current message
    calls: list[dict[str, Any]] = field(default_factory=list)  # every request, in order
    faults: deque[Fault] = field(default_factory=deque)
    port: int = 0
    started: int = 0  # requests that reached the server (a slow one counts before it answers)

    def __post_init__(self) -> None:
        self._ts = itertools.count(1)
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    @property
    def webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/webhook/{self.webhook_path}"

    def fail_next(self, n: int, kind: str, value: Any = None) -> None:
        """Answer the next n requests with a fault instead of the normal reply."""
        with self._lock:
            self.faults.extend(Fault(kind, value) for _ in range(n))

    def posted(self) -> list[dict[str, Any]]:
        """Return the successful chat.postMessage/webhook calls."""
        with self._lock:
            return [c for c in self.calls if c["ok"] and c["method"] in ("chat.postMessage", "webhook")]

    def start(self) -> SlackDouble:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> SlackDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_post("/webhook/{path:.*}", self._webhook)
        app.router.add_post("/generic/{path:.*}", self._generic)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", self.port)
        self._loop.run_until_complete(site.start())
        self.port = runner.addresses[0][1]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    async def _fault(self) -> web.Response | None:
        with self._lock:
            f = self.faults.popleft() if self.faults else None
        if f is None:
            return None
        if f.kind == "slow":
            await asyncio.sleep(float(f.value))
            return None
        if f.kind == "ratelimit":
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                     headers={"Retry-After": str(f.value or 1)})
        if f.kind == "status":
            return web.Response(status=int(f.value), text="upstream error")
        return web.json_response({"ok": False, "error": str(f.value)})

    async def _body(self, req: web.Request) -> dict[str, Any]:
        if req.content_type == "application/json":
            return dict(await req.json())
        form = dict(await req.post())
        if isinstance(form.get("blocks"), str):
            form["blocks"] = json.loads(str(form["blocks"]))
        return form

    def _record(self, method: str, ok: bool, body: dict[str, Any], ts: str | None = None) -> None:
        with self._lock:
            self.calls.append({"method": method, "ok": ok, "ts": ts, "at": time.time(), **body})

    async def _api(self, req: web.Request) -> web.Response:
        method = req.match_info["method"]
        with self._lock:
            self.started += 1
        fault = await self._fault()
        if fault is not None:
            self._record(method, False, {"fault": fault.status})
            return fault
        body = await self._body(req)
        if req.headers.get("Authorization") != f"Bearer {self.token}":
            self._record(method, False, body)
            return web.json_response({"ok": False, "error": "invalid_auth"})
        if method == "auth.test":
            return web.json_response({"ok": True, "team": "T", "user": "sloguard", "bot_id": "B1"})
        if method == "chat.postMessage":
            ts = f"1700000000.{next(self._ts):06d}"
            channel = str(body.get("channel") or "")
            if not channel:
                return web.json_response({"ok": False, "error": "channel_not_found"})
            with self._lock:
                self.messages[ts] = {"channel": channel, **body}
            self._record(method, True, body, ts)
            return web.json_response({"ok": True, "channel": channel, "ts": ts, "message": {"text": body.get("text")}})
        if method == "chat.update":
            ts = str(body.get("ts"))
            with self._lock:
                known = ts in self.messages
                if known:
                    self.messages[ts] = {**self.messages[ts], **body}
            self._record(method, known, body, ts)
            if not known:
                return web.json_response({"ok": False, "error": "message_not_found"})
            return web.json_response({"ok": True, "channel": body.get("channel"), "ts": ts})
        return web.json_response({"ok": False, "error": "unknown_method"}, status=404)

    async def _webhook(self, req: web.Request) -> web.Response:
        fault = await self._fault()
        if fault is not None:
            self._record("webhook", False, {"fault": fault.status})
            return fault
        if req.match_info["path"] != self.webhook_path:
            return web.Response(status=404, text="no_service")
        body = await self._body(req)
        self._record("webhook", True, body)
        return web.Response(text="ok")

    async def _generic(self, req: web.Request) -> web.Response:
        """Any other JSON receiver (Alertmanager API, generic webhook): record the body, answer 200."""
        fault = await self._fault()
        if fault is not None:
            self._record("generic", False, {"fault": fault.status})
            return fault
        self._record("generic", True, {"path": req.match_info["path"], "json": await req.json(),
                                       "authorization": req.headers.get("Authorization", "")})
        return web.Response(text="ok")


# A daemon config fragment for e2e tests: page #oncall through this server on a fast burn of the simulator's SLO.
TOKEN_ENV = "SLOGUARD_E2E_SLACK_TOKEN"
# Fires when a fifth of the last 5 minutes' requests spent budget (error_rate target 0.99 → burn 20).
BURN_RULE = """alerts:
  - {name: SLOBurnFast, expr: 'sloguard_slo_burn_rate{slo="sim-latency",window="5m"} > 20', severity: page,
     summary: "sim-latency burns {{ $value }}x"}
"""


def slack_notifier(api_url: str) -> str:
    """Return a `notifiers:` entry sending SLOBurnFast to the Slack-like server at `api_url`."""
    return (f"  - {{name: oncall, type: slack, token_env: {TOKEN_ENV}, channel: '#oncall', api_url: '{api_url}',\n"
            "     match: {alertname: [SLOBurnFast]}, group_wait: 0s, group_interval: 1s, repeat_interval: 1h}\n")
