"""Listener hygiene: head deadline, connection cap and eviction, cheap auth failures, lifecycle, streamed results."""

from __future__ import annotations

import asyncio
import base64
import socket
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import bcrypt
import pytest
from aiohttp import web

from sloguard.exporter.server import Endpoints, start_server
from sloguard.snapshot import Snapshot
from sloguard.web.basicauth import BasicAuth
from sloguard.web.guard import Guard, Limits
from sloguard.web.webconfig import WebConfig, load_web_config


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def _reload() -> bool:
    return True


def _lines(spec: str, limit: int) -> Iterator[str]:
    if spec == "store:bad":
        raise ValueError("store:bad: no such slice")
    n = 2500
    if n > limit:
        raise ValueError(f"{spec}: the slice holds {n} results, more than the limit of {limit}")
    return iter(['{"count": 2500}\n', *(f'{{"i": {i}}}\n' for i in range(n))])


async def _serve(web_config: WebConfig | None = None, limits: Limits | None = None, lifecycle: bool = False,
                 ) -> tuple[web.AppRunner, str, Guard]:
    guard = Guard(limits or Limits(), "web")
    ep = Endpoints(Snapshot(), _reload, lambda: True, results=_lines, lifecycle=lifecycle, max_rows=2000)
    runner, port = await start_server(ep, web_config or WebConfig(), "127.0.0.1:0", guard)
    return runner, f"http://127.0.0.1:{port}", guard


def _half_sent(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # no blank line: the head never ends
    return s


def _closed(s: socket.socket) -> bool:
    s.settimeout(5)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_request_head_that_never_ends_is_closed_at_the_deadline() -> None:
    async def scenario() -> None:
        runner, url, guard = await _serve(limits=Limits(header_timeout=0.2))
        try:
            s = _half_sent(url)
            assert await asyncio.to_thread(_closed, s)
            s.close()
            assert guard.counts["header_timeout"] == 1
            async with aiohttp.ClientSession() as c, c.get(f"{url}/metrics") as resp:
                assert resp.status == 200  # a whole head in time is served
        finally:
            await runner.cleanup()

    asyncio.run(scenario())


def test_at_the_cap_a_new_connection_evicts_a_slow_head_never_a_request() -> None:
    async def scenario() -> None:
        runner, url, guard = await _serve(limits=Limits(max_connections=4, header_timeout=30))
        try:
            slow = [_half_sent(url) for _ in range(6)]
            await asyncio.sleep(0.2)
            assert guard.open == 4 and guard.counts["evicted"] == 2
            async with aiohttp.ClientSession() as c, c.get(f"{url}/metrics") as resp:
                assert resp.status == 200  # evicted the oldest slow head to get in
            assert guard.counts["evicted"] == 3
            assert [await asyncio.to_thread(_closed, s) for s in slow[:3]] == [True, True, True]
            for s in slow:
                s.close()
        finally:
            await runner.cleanup()

    asyncio.run(scenario())


def test_basic_auth_caches_each_verdict_and_sheds_a_queue() -> None:
    now = [0.0]
    auth = BasicAuth({"alice": bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4))}, ttl=60, size=3,
                     max_waiting=0, clock=lambda: now[0])
    good, bad = _basic("alice", "s3cret"), _basic("alice", "nope")
    assert auth.check(good) and not auth.check(bad) and auth.bcrypt_checks == 2
    assert auth.check(good) and not auth.check(bad) and auth.bcrypt_checks == 2  # both verdicts cached
    now[0] = 59.0
    assert auth.cached(good) is True  # used: its ttl starts again
    now[0] = 100.0
    assert auth.cached(good) is True and auth.cached(bad) is None  # the unused one expired
    assert auth.cached("Basic !!") is False and auth.cached(None) is False
    assert asyncio.run(auth.allowed(_basic("bob", "x"))) is None  # nothing may wait: "busy", not a queue
    assert asyncio.run(auth.allowed(good)) is True  # a cached credential never waits


def test_reload_needs_the_lifecycle_flag_or_credentials(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  alice: '{hashed}'\n")

    async def post(web_config: WebConfig | None, lifecycle: bool, auth: str | None) -> int:
        runner, url, _ = await _serve(web_config, lifecycle=lifecycle)
        try:
            headers = {"Authorization": auth} if auth else {}
            async with aiohttp.ClientSession() as c, c.post(f"{url}/-/reload", headers=headers) as resp:
                return resp.status
        finally:
            await runner.cleanup()

    web_config = load_web_config(tmp_path / "web.yml")
    assert asyncio.run(post(None, False, None)) == 403
    assert asyncio.run(post(None, True, None)) == 200
    assert asyncio.run(post(web_config, False, None)) == 401
    assert asyncio.run(post(web_config, False, _basic("alice", "s3cret"))) == 200


@pytest.mark.parametrize(("query", "status", "lines"), [
    ("slice=store:all", 400, 0),  # 2500 rows, over the 2000-row cap
    ("slice=store:all&limit=2000", 400, 0),
    ("slice=store:all&limit=0", 400, 0),
    ("slice=store:all&limit=x", 400, 0),
    ("slice=store:bad", 400, 0),
    ("slice=nope", 400, 0),
])
def test_results_refuses_bad_or_too_large_slices(query: str, status: int, lines: int) -> None:
    async def scenario() -> tuple[int, str]:
        runner, url, _ = await _serve()
        try:
            async with aiohttp.ClientSession() as c, c.get(f"{url}/api/v1/results?{query}") as resp:
                return resp.status, await resp.text()
        finally:
            await runner.cleanup()

    got, text = asyncio.run(scenario())
    assert got == status and "Traceback" not in text


def test_results_stream_in_batches_and_the_store_is_closed() -> None:
    closed = []

    def lines(spec: str, limit: int) -> Iterator[str]:
        def gen() -> Iterator[str]:
            try:
                yield '{"count": 1500}\n'
                for i in range(1500):
                    yield f'{{"i": {i}}}\n'
            finally:
                closed.append(spec)
        return gen()

    async def scenario() -> list[str]:
        guard = Guard(Limits(), "web")
        ep = Endpoints(Snapshot(), _reload, lambda: True, results=lines)
        runner, port = await start_server(ep, WebConfig(), "127.0.0.1:0", guard)
        try:
            async with aiohttp.ClientSession() as c, \
                    c.get(f"http://127.0.0.1:{port}/api/v1/results?slice=store:x") as resp:
                assert resp.headers["Content-Type"] == "application/x-ndjson"
                return (await resp.text()).splitlines()
        finally:
            await runner.cleanup()

    got = asyncio.run(scenario())
    assert len(got) == 1501 and got[-1] == '{"i": 1499}' and closed == ["store:x"]
