"""A server's /v1/models and version answers are untrusted: read within a byte and count limit, strings bounded and
stripped of control characters; an answer beyond the limits is dropped (the identity keeps what it knew), counted."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sloguard import untrusted
from sloguard.answer import MAX_MODELS
from sloguard.reports.identity import MODELS_CHARS, UNSEEN, Identity, IdentitySource, Observed, merge, models_text


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    untrusted.REJECTIONS.clear()
    yield
    untrusted.REJECTIONS.clear()


def raw(body: bytes, **headers: str) -> web.Response:
    return web.Response(body=body, content_type="application/json", headers=headers)


def million_models() -> bytes:
    return b'{"object":"list","data":[' + b",".join(b'{"id":"lora-%d","object":"model"}' % i
                                                    for i in range(1_000_000)) + b"]}"


def collect(models: web.Response, version: Any = "0.11.0") -> Observed:
    async def go() -> Observed:
        app = web.Application()

        async def send_models(_: web.Request) -> web.Response:
            return models

        async def send_version(_: web.Request) -> web.Response:
            return version if isinstance(version, web.Response) else web.json_response({"version": version})

        app.router.add_get("/v1/models", send_models)
        app.router.add_get("/version", send_version)
        async with TestServer(app) as srv:
            src = IdentitySource("t", str(srv.make_url("/v1")), "vllm", None, 60.0)
            try:
                out = await src.collect()
            finally:
                await src.close()
            assert isinstance(out.payload, Observed)
            return out.payload
    return asyncio.run(go())


@pytest.mark.parametrize(("body", "reason"), [
    (raw(million_models()), "too_large"),  # 1,000,000 models: ~40 MB
    (raw(b'{"data":[{"id":"' + b"m" * (16 << 20) + b'"}]}'), "too_large"),  # one 16 MB model name
    (raw(json.dumps({"data": [{"id": f"m{i}"} for i in range(MAX_MODELS + 1)]}).encode()), "too_many"),
    (raw(gzip.compress(json.dumps({"data": [{"id": "m"}]}).encode()), **{"Content-Encoding": "gzip"}), "compressed"),
    (raw(b'{"data": [{"id": NaN}]}'), "not_json"),
    (raw(b"[" * 100_000 + b"]" * 100_000), "not_json"),
])
def test_an_answer_beyond_the_limits_is_dropped_and_counted(body: web.Response, reason: str) -> None:
    seen = collect(body)  # the daemon's memory under these answers: tests/e2e/test_hostile_engine.py
    assert seen.models is UNSEEN and seen.engine_version == "0.11.0"
    assert untrusted.REJECTIONS.snapshot() == {("identity", reason): 1}


def test_control_bytes_and_long_names_are_bounded() -> None:
    models = raw(json.dumps({"data": [{"id": "<!channel>\x1b[2J\u2028" + "x" * 1000}, {"id": "m1"}]}).encode())
    seen = collect(models, version="0.11\n# INJECTED\x1b[31m")
    assert seen.engine_version == "0.11# INJECTED[31m"
    assert isinstance(seen.models, list) and len(seen.models[0]) == untrusted.MAX_TEXT
    assert not any(c in "".join(seen.models) for c in "\x1b\u2028")


def test_many_served_models_make_a_bounded_label_that_still_tells_lists_apart() -> None:
    ids = [f"org/model-with-a-long-name-{i:04d}" for i in range(900)]
    a, b = models_text(ids), models_text([*ids[:-1], "org/other"])
    assert len(a) <= MODELS_CHARS and "(+" in a and a != b
    ident = merge(Identity("t"), Observed("t", "1", ids))
    assert ident.model == a and models_text(["b", "a"]) == "a,b"
