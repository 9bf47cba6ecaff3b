"""The OTLP receiver fed by the real OpenTelemetry SDK exporter with spans shaped like each engine's."""

from __future__ import annotations

import asyncio
import base64
import gzip
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import bcrypt
import pytest
import requests
from support.otlp import ENGINES, Engine, fixture

from sloguard.exporter.webconfig import WebConfig, load_web_config
from sloguard.model import ProbeResult
from sloguard.traces.join import Joiner
from sloguard.traces.otlp import Decoded
from sloguard.traces.receiver import Receiver

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


class Rig:
    def __init__(self, joiner: Joiner) -> None:
        self.joiner, self.ready, self.calls = joiner, list[ProbeResult](), 0

    def sink(self, d: Decoded) -> None:
        self.calls += 1
        self.joiner.spans["irrelevant"] += d.irrelevant
        self.joiner.spans["malformed"] += d.malformed
        self.ready += self.joiner.add(d.spans, time.time())


async def run(rig: Rig, body: Callable[[str], Awaitable[Any]], web_config: WebConfig | None = None,
              limit: int = 4 * 1024 * 1024) -> Any:
    rec = Receiver(rig.sink, web_config or WebConfig(), limit)
    port = await rec.start("127.0.0.1:0")
    try:
        return await body(f"http://127.0.0.1:{port}/v1/traces")
    finally:
        await rec.stop()


def probe_result(tid: str = TID) -> ProbeResult:
    return ProbeResult(ts=0.0, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=0.5, trace_id=tid)


@pytest.mark.parametrize("engine", ENGINES)
def test_sdk_exported_engine_spans_join_their_probe(engine: str) -> None:
    fx = fixture(engine)
    rig = Rig(Joiner())
    rig.joiner.offer([(probe_result(), "otlp", engine)], now=time.time())

    async def body(url: str) -> None:
        eng = Engine(url, fx["service"])
        await asyncio.to_thread(eng.emit, fx["spans"], TID, PARENT, time.time_ns())
        eng.close()

    asyncio.run(run(rig, body))
    [r] = rig.ready
    assert r.record == "otlp"
    for field, attr in (("queue_s", "queue_s"), ("prefill_s", "prefill_s"), ("decode_s", "server_decode_s"),
                        ("ttft_s", "server_ttft_s")):
        assert getattr(r, attr) == (pytest.approx(fx["expect"][field], abs=2e-6) if field in fx["expect"] else None)
    if "ttft_s" in fx["expect"]:
        assert r.network_s == pytest.approx(0.5 - fx["expect"]["ttft_s"], abs=2e-6)


def test_foreign_late_duplicate_spans_through_the_sdk() -> None:
    fx = fixture("vllm")
    rig = Rig(Joiner(orphan_ttl=0.0))
    rig.joiner.offer([(probe_result(), "otlp", "vllm")], now=time.time())

    async def body(url: str) -> None:
        eng = Engine(url, "vllm")
        for tid in (TID, TID, "99" * 16):  # the second one is late (its result was finalised), the third foreign
            await asyncio.to_thread(eng.emit, fx["spans"], tid, PARENT, time.time_ns())
        eng.close()

    asyncio.run(run(rig, body))
    rig.joiner.due(time.time() + 1)
    assert len(rig.ready) == 1
    assert (rig.joiner.spans["joined"], rig.joiner.spans["late"], rig.joiner.spans["foreign"]) == (1, 1, 1)


def test_malformed_gzip_auth_and_too_large(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  otel: '{hashed}'\n")
    web = load_web_config(tmp_path / "web.yml")
    rig = Rig(Joiner())
    good = "Basic " + base64.b64encode(b"otel:s3cret").decode()
    proto = {"Content-Type": "application/x-protobuf", "Authorization": good}

    async def body(url: str) -> list[int]:
        async with aiohttp.ClientSession() as s:
            codes = []
            for data, headers in (
                (b"\xff\xff\xff", proto),  # not protobuf
                (gzip.compress(b""), {**proto, "Content-Encoding": "gzip"}),  # empty request: fine
                (b"", {**proto, "Authorization": "Basic " + base64.b64encode(b"otel:wrong").decode()}),
                (b"{}", {**proto, "Content-Type": "application/json"}),
                (b"\0" * 5000, proto),  # over the limit
                (gzip.compress(b"\0" * 5000), {**proto, "Content-Encoding": "gzip"}),  # over it once unzipped
            ):
                async with s.post(url, data=data, headers=headers) as resp:
                    codes.append(resp.status)
            return codes

    codes = asyncio.run(run(rig, body, web, limit=4096))
    assert codes == [400, 200, 401, 415, 413, 413]


def test_flood_of_foreign_spans_stays_bounded() -> None:
    fx = fixture("vllm")
    rig = Rig(Joiner(max_orphans=50))

    async def body(url: str) -> None:
        eng = Engine(url, "vllm")
        for i in range(300):
            await asyncio.to_thread(eng.emit, fx["spans"], f"{i + 1:032x}", PARENT, time.time_ns())
        eng.close()

    asyncio.run(run(rig, body))
    assert rig.joiner.orphans == 50 and rig.joiner.spans["overflow"] == 250


def test_tls_mtls_and_basic_auth_with_the_sdk_exporter(tmp_path: Path) -> None:
    from support.tls import pki

    pki(tmp_path)
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    (tmp_path / "web.yml").write_text(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
        f"basic_auth_users:\n  otel: '{hashed}'\n")
    fx = fixture("vllm")
    rig = Rig(Joiner())
    rig.joiner.offer([(probe_result(), "otlp", "vllm")], now=time.time())

    session = requests.Session()
    session.trust_env = False  # else requests prefers REQUESTS_CA_BUNDLE from the environment over the CA file

    async def body(url: str) -> None:
        eng = Engine(url.replace("http://", "https://"), "vllm", session=session,
                     certificate_file=str(tmp_path / "ca.crt"),
                     client_certificate_file=str(tmp_path / "client.crt"),
                     client_key_file=str(tmp_path / "client.key"),
                     headers={"Authorization": "Basic " + base64.b64encode(b"otel:s3cret").decode()})
        await asyncio.to_thread(eng.emit, fx["spans"], TID, PARENT, time.time_ns())
        eng.close()

    asyncio.run(run(rig, body, load_web_config(tmp_path / "web.yml")))
    [r] = rig.ready
    assert r.record == "otlp" and r.network_s is not None
