"""A hostile OpenAI-compatible engine: one behaviour per path prefix `/<kind>/...`, served from a thread.

Each kind answers `POST /<kind>/v1/chat/completions` (SSE), `GET /<kind>/v1/models` and `GET /<kind>/version`
(vLLM's version endpoint) as a real vLLM does, except for its one hostile trait (issue 47's findings):
- `healthy`: 8 tokens, usage, `[DONE]`; `huge_tokens` / `negative_tokens` / `nan_tokens`: usage
  `completion_tokens` of 2^63, -9,999,464 or a bare `NaN`;
- `many_models`: 1,000,000 models in /v1/models (~40 MB); `long_model`: one model name of 16 MB;
- `control_bytes`: a model id and an engine version with a Slack ping, a link, a Markdown heading, escape bytes,
  CR and U+2028, and an error event holding the same.
`GET /ping` answers at once: the machine's own latency, interleaved with the daemon's GETs as their baseline.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field

from aiohttp import web

HOSTILE_TEXT = "<!channel> <https://evil.example/|x>\n# INJECTED HEADING\n<img src=x>\x1b[2J\x1b[31m\r\u2028"
TOKENS = 8
KINDS = ("healthy", "huge_tokens", "negative_tokens", "nan_tokens", "many_models", "long_model", "control_bytes")
USAGE = {"huge_tokens": b"9223372036854775808", "negative_tokens": b"-9999464", "nan_tokens": b"NaN"}


def _models(kind: str) -> bytes:
    if kind == "many_models":
        rows = b",".join(b'{"id":"lora-%d","object":"model","owned_by":"vllm"}' % i for i in range(1_000_000))
        return b'{"object":"list","data":[' + rows + b"]}"
    name = {"long_model": "m" * (16 << 20), "control_bytes": HOSTILE_TEXT}.get(kind, "m")
    return json.dumps({"object": "list", "data": [{"id": name, "object": "model", "max_model_len": 4096}]}).encode()


def _event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


@dataclass
class HostileEngine:
    """Serve every kind of KINDS on 127.0.0.1 from a thread; `url(kind)` is a target's api_url."""

    port: int = 0
    hits: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._models = {k: _models(k) for k in KINDS}
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="hostile-engine", daemon=True)

    def url(self, kind: str) -> str:
        return f"http://127.0.0.1:{self.port}/{kind}"

    def __enter__(self) -> HostileEngine:
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("hostile engine did not start")
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _count(self, request: web.Request, what: str) -> str:
        kind = request.match_info["kind"]
        self.hits[f"{kind}{what}"] = self.hits.get(f"{kind}{what}", 0) + 1
        return kind

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        kind = self._count(request, "/chat")
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if kind == "control_bytes":
            await resp.write(_event({"object": "error", "message": HOSTILE_TEXT}))
            return resp
        for i in range(TOKENS):
            await resp.write(_event({"choices": [{"index": 0, "delta": {"content": f" t{i}"}, "finish_reason": None}]}))
            await asyncio.sleep(0.005)
        await resp.write(_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        count = USAGE.get(kind, str(TOKENS + 1).encode())
        await resp.write(b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":' + count + b"}}\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def _models_route(self, request: web.Request) -> web.Response:
        kind = self._count(request, "/models")
        return web.Response(body=self._models.get(kind, self._models["healthy"]), content_type="application/json")

    async def _version(self, request: web.Request) -> web.Response:
        kind = self._count(request, "/version")
        return web.json_response({"version": "0.11.0" + (HOSTILE_TEXT if kind == "control_bytes" else "")})

    async def _ping(self, _: web.Request) -> web.Response:
        return web.Response(text="pong")

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=1 << 20)
        app.router.add_get("/ping", self._ping)
        app.router.add_post("/{kind}/v1/chat/completions", self._chat)
        app.router.add_get("/{kind}/v1/models", self._models_route)
        app.router.add_get("/{kind}/version", self._version)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", self.port)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(runner.cleanup())
