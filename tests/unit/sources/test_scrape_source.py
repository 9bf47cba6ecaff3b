"""ScrapeSource against a loopback aiohttp server: every bad answer is a SourceError with a reason."""

from __future__ import annotations

import asyncio
import gzip
import logging
import tempfile
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from metrics_fixtures import SHARED

from sloguard.clock import FakeClock
from sloguard.config.spec import TargetSpec
from sloguard.model import ServerView
from sloguard.sources.base import SourceError, SourceOutput
from sloguard.sources.parsepool import POOL, PROCESS_THRESHOLD
from sloguard.sources.scrape import ScrapeSource

VLLM = (SHARED / "vllm-v1-dynamo-2026-01.txt").read_text()
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def text(body: str | bytes, status: int = 200, ctype: str = "text/plain; version=0.0.4") -> Handler:
    async def handle(_: web.Request) -> web.StreamResponse:
        data = body.encode() if isinstance(body, str) else body
        return web.Response(body=data, status=status, headers={"Content-Type": ctype})

    return handle


async def truncated(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/plain", "Content-Length": "100000"})
    await resp.prepare(request)
    await resp.write(VLLM[:5000].encode())
    request.transport.close()  # type: ignore[union-attr]
    return resp


async def slow(_: web.Request) -> web.StreamResponse:
    await asyncio.sleep(1)
    return web.Response(text=VLLM)


async def gzipped(_: web.Request) -> web.StreamResponse:
    return web.Response(body=gzip.compress(b"vllm:num_requests_running 1\n" * 2000),
                        headers={"Content-Encoding": "gzip", "Content-Type": "text/plain"})


async def serve(handler: Handler, use: Callable[[str], Awaitable[object]]) -> object:
    """Serve `handler` on a free loopback port while `use(url)` runs; return what it returns."""
    app = web.Application()
    app.router.add_get("/metrics", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        return await use(f"http://127.0.0.1:{port}/metrics")
    finally:
        await runner.cleanup()


async def collect_once(url: str, **spec: object) -> object:
    """Collect once; return the SourceOutput or the SourceError raised."""
    src = source(url, **spec)
    try:
        return await src.collect()
    except SourceError as exc:
        return exc
    finally:
        await src.close()


def collect(url: str, **spec: object) -> object:
    return asyncio.run(collect_once(url, **spec))


def scrape(handler: Handler, **spec: object) -> object:
    return asyncio.run(serve(handler, lambda url: collect_once(url, **spec)))


def source(url: str, **kw: object) -> ScrapeSource:
    spec = TargetSpec(name="chat", metrics_url=url, **kw)  # type: ignore[arg-type]
    return ScrapeSource(spec, clock=FakeClock(), secrets={"chat": "s3cret-token"})


def test_scrape_ok_sends_bearer_and_returns_view() -> None:
    seen: dict[str, str] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.update(request.headers)
        return web.Response(text=VLLM)

    out = scrape(handle)
    assert isinstance(out, SourceOutput) and isinstance(out.payload, ServerView)
    assert out.payload.engine == "vllm" and "Qwen/Qwen3-0.6B" in out.payload.models
    assert seen["Authorization"] == "Bearer s3cret-token"
    assert {f.name for f in out.families} == {"sloguard_scrape_body_bytes", "sloguard_scrape_samples"}


@pytest.mark.parametrize(
    ("handler", "reason", "spec"),
    [
        (text("nope", status=503), "http_status", {}),
        (text("<html><body>login</body></html>", ctype="text/html"), "not_metrics", {}),
        (text("<!doctype html><p>x</p>", ctype="text/plain"), "not_metrics", {}),
        (text('{"object": "error"}', ctype="application/json"), "not_metrics", {}),
        (text('"vllm:num_requests_running 1\\n"', ctype="text/plain"), "not_metrics", {}),
        (text("x" * 5000), "too_large", {"max_body_bytes": 1000}),
        (gzipped, "too_large", {"max_body_bytes": 10000}),
        (text("vllm:num_requests_running{"), "parse", {}),
        (text("\x00\xff garbage \x01"), "parse", {}),
        (text("process_cpu_seconds_total 1\n"), "no_known_metrics", {}),
        (text(""), "no_known_metrics", {}),
        (truncated, "parse", {}),
        (slow, "timeout", {"scrape_timeout": "200ms", "scrape_interval": "1s"}),
    ],
    ids=["503", "html", "html-as-text", "json", "json-quoted", "too-large", "gzip-bomb", "bad-line", "binary",
         "no-engine", "empty", "truncated", "timeout"],
)
def test_failures_have_reasons(handler: Handler, reason: str, spec: dict[str, object]) -> None:
    err = scrape(handler, **spec)
    assert isinstance(err, SourceError)
    assert err.reason == reason
    assert "s3cret" not in str(err)


def test_connect_refused() -> None:
    err = collect("http://127.0.0.1:9/metrics")
    assert isinstance(err, SourceError) and err.reason == "connect"


def test_file_url_and_missing_file(tmp_path: Path) -> None:
    f = tmp_path / "m.txt"
    f.write_text(VLLM)
    out = collect(f.as_uri())
    assert isinstance(out, SourceOutput) and isinstance(out.payload, ServerView) and out.payload.engine == "vllm"
    err = collect((tmp_path / "nope.txt").as_uri())
    assert isinstance(err, SourceError) and err.reason == "connect"


def test_reason_logged_once_and_recovery_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    f = tmp_path / "m.txt"
    f.write_text("<html>")
    src = source(f.as_uri())
    caplog.set_level(logging.INFO, logger="sloguard.scrape")

    async def go() -> None:
        for _ in range(3):
            with pytest.raises(SourceError):
                await src.collect()
        f.write_text(VLLM)
        await src.collect()
        await src.collect()

    asyncio.run(go())
    msgs = [r.getMessage() for r in caplog.records]
    assert sum("reason=not_metrics" in m for m in msgs) == 1
    assert sum("recovered" in m for m in msgs) == 1
    assert not any("s3cret" in m for m in msgs)


def test_restart_detected_and_counted(tmp_path: Path) -> None:
    f = tmp_path / "m.txt"
    src = source(f.as_uri())

    async def go() -> None:
        for running in (10.0, 20.0, 3.0, 4.0):  # the counter drops after the second scrape
            f.write_text(f'vllm:generation_tokens_total{{model_name="m"}} {running}\n')
            await src.collect()

    asyncio.run(go())
    assert src.restarts == 1


def _encoded(data: bytes, encoding: str) -> Handler:
    async def handle(_: web.Request) -> web.StreamResponse:
        return web.Response(body=data, headers={"Content-Encoding": encoding, "Content-Type": "text/plain"})

    return handle


@pytest.mark.parametrize(("encoding", "pack"), [
    ("gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some servers send it
])
def test_compressed_pages_are_inflated_off_the_loop(encoding: str, pack: Callable[[bytes], bytes]) -> None:
    out = scrape(_encoded(pack(VLLM.encode()), encoding))
    assert isinstance(out, SourceOutput) and isinstance(out.payload, ServerView)
    assert "Qwen/Qwen3-0.6B" in out.payload.models


@pytest.mark.parametrize(("handler", "reason"), [
    (_encoded(b"not gzip at all", "gzip"), "parse"),
    (_encoded(b"x", "br"), "not_metrics"),
    (_encoded(gzip.compress(b"#" * (64 << 20)), "gzip"), "too_large"),  # 64 MiB of comment from 64 KiB
])
def test_bad_or_bombing_encodings_fail_with_a_reason(handler: Handler, reason: str) -> None:
    out = scrape(handler)
    assert isinstance(out, SourceError) and out.reason == reason, out


def test_a_page_over_the_sample_limit_is_rejected_whole() -> None:
    page = VLLM + "".join(f"filler_total{{i=\"{i}\"}} 1\n" for i in range(2_000))
    out = scrape(text(page), sample_limit=1_000)
    assert isinstance(out, SourceError) and out.reason == "sample_limit"
    assert "more than 1000 samples" in str(out)
    ok = scrape(text(page), sample_limit=0)
    assert isinstance(ok, SourceOutput)
    assert next(s.value for f in ok.families for s in f.samples if f.name == "sloguard_scrape_samples") > 2_000


def test_a_large_page_is_spooled_to_the_parser_process_and_its_spool_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    page = VLLM + "".join(f'filler_total{{path="/{i:07d}"}} 1\n' for i in range(60_000))  # > 1 MiB
    assert len(page) >= PROCESS_THRESHOLD
    out = scrape(text(page), sample_limit=0)
    assert isinstance(out, SourceOutput) and isinstance(out.payload, ServerView)
    assert "Qwen/Qwen3-0.6B" in out.payload.models
    assert POOL._pool is not None  # digested by the parser process, not in this one
    assert not list(tmp_path.glob("sloguard-page-*"))
    err = scrape(text(page))  # over the default sample_limit: rejected there, spool removed too
    assert isinstance(err, SourceError) and err.reason == "sample_limit"
    assert not list(tmp_path.glob("sloguard-page-*"))


def test_a_large_file_target_is_parsed_by_path_and_never_removed(tmp_path: Path) -> None:
    f = tmp_path / "big.txt"
    f.write_text(VLLM + "".join(f'filler_total{{path="/{i:07d}"}} 1\n' for i in range(40_000)))
    out = collect(f.as_uri(), sample_limit=0)
    assert isinstance(out, SourceOutput) and isinstance(out.payload, ServerView)
    assert f.exists()
