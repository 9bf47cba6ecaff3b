"""The OTLP receiver fed by the real OpenTelemetry SDK exporter with spans shaped like each engine's."""

from __future__ import annotations

import asyncio
import base64
import gzip
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import bcrypt
import pytest
import requests
from support.otlp import ENGINES, Engine, fixture

from sloguard.model import ProbeResult
from sloguard.traces.decoder import BodyLimits, Decoder
from sloguard.traces.join import Joiner
from sloguard.traces.otlp import Decoded
from sloguard.traces.receiver import Receiver, Settings
from sloguard.web.webconfig import WebConfig, load_web_config

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


DECODER = Decoder(BodyLimits(4 * 1024 * 1024), keep_raw=False)


@pytest.fixture(scope="module", autouse=True)
def _decoder() -> Iterator[None]:
    """One decoder process for the module (each Receiver would spawn its own: ~0.5 s apiece)."""
    DECODER.start()
    yield
    DECODER.close()


async def run(rig: Rig, body: Callable[[str], Awaitable[Any]], web_config: WebConfig | None = None,
              limit: int = 4 * 1024 * 1024, settings: Settings | None = None) -> Any:
    settings = settings or Settings(max_body_bytes=limit)
    DECODER.limits = BodyLimits(settings.max_body_bytes, settings.max_decompression_ratio)
    rec = Receiver(rig.sink, web_config or WebConfig(), settings, decoder=DECODER)
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


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_statuses_for_each_kind_of_body(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  otel: '{hashed}'\n")
    web = load_web_config(tmp_path / "web.yml")
    rig = Rig(Joiner())
    proto = {"Content-Type": "application/x-protobuf", "Authorization": _basic("otel", "s3cret")}
    as_json = {**proto, "Content-Type": "application/json"}
    cases = [
        (b"\xff\xff\xff", proto, 400),  # not protobuf
        (gzip.compress(b""), {**proto, "Content-Encoding": "gzip"}, 200),  # empty request, inflated once
        (zlib.compress(b""), {**proto, "Content-Encoding": "deflate"}, 200),
        (b"", {**proto, "Authorization": _basic("otel", "wrong")}, 401),
        (b"", {**proto, "Authorization": "Bearer x"}, 401),
        (b"{}", as_json, 200),  # OTLP/HTTP JSON
        (b"{", as_json, 400),
        (b"[1]", as_json, 400),
        (b"[" * 2000 + b"]" * 2000, as_json, 400),  # nesting past the recursion limit: refused, not a crash
        (b"", {**proto, "Content-Type": "text/plain"}, 415),
        (b"", {**proto, "Content-Encoding": "br"}, 415),
        (b"\0" * 5000, proto, 413),  # over the limit as sent
        (gzip.compress(b"\0" * 5000), {**proto, "Content-Encoding": "gzip"}, 413),  # over it once inflated
        (gzip.compress(b"x"), {**proto, "Content-Encoding": "gzip"}, 400),  # inflates to garbage
        (gzip.compress(b"")[:-4], {**proto, "Content-Encoding": "gzip"}, 400),  # truncated
    ]

    async def body(url: str) -> list[int]:
        async with aiohttp.ClientSession(auto_decompress=False) as s:
            codes = []
            for data, headers, _ in cases:
                async with s.post(url, data=data, headers=headers) as resp:
                    codes.append(resp.status)
            return codes

    codes = asyncio.run(run(rig, body, web, limit=4096))
    assert codes == [c for _, _, c in cases]


def test_gzip_inflation_is_bounded_by_ratio_as_well_as_bytes() -> None:
    from sloguard.traces.decoder import TooLarge, inflate

    bomb = gzip.compress(b"\0" * (4 << 20))  # 4 MiB -> ~4 KiB
    with pytest.raises(TooLarge):
        inflate(bomb, "gzip", BodyLimits(20 << 20, max_ratio=100))  # within 20 MiB, but 1000x
    assert len(inflate(bomb, "gzip", BodyLimits(20 << 20, max_ratio=2000))) == 4 << 20
    two = gzip.compress(b"a") + gzip.compress(b"b")  # multi-member, as Go's gzip reader reads it
    assert inflate(two, "gzip", BodyLimits(1 << 20)) == b"ab"
    assert inflate(zlib.compress(b"abc")[2:-4], "deflate", BodyLimits(1 << 20)) == b"abc"  # raw deflate


@pytest.mark.parametrize("compression", ["gzip", "deflate", "none"])
def test_sdk_exporter_with_each_compression_joins(compression: str) -> None:
    from opentelemetry.exporter.otlp.proto.http import Compression

    fx = fixture("vllm")
    rig = Rig(Joiner())
    rig.joiner.offer([(probe_result(), "otlp", "vllm")], now=time.time())

    async def body(url: str) -> None:
        eng = Engine(url, "vllm", compression={"gzip": Compression.Gzip, "deflate": Compression.Deflate,
                                               "none": Compression.NoCompression}[compression])
        await asyncio.to_thread(eng.emit, fx["spans"], TID, PARENT, time.time_ns())
        eng.close()

    asyncio.run(run(rig, body))
    [r] = rig.ready
    assert r.record == "otlp"


def test_json_export_joins_and_invalid_spans_are_a_partial_success() -> None:
    fx = fixture("vllm")
    rig = Rig(Joiner())
    rig.joiner.offer([(probe_result(), "otlp", "vllm")], now=time.time())
    now = time.time_ns()
    attrs = [{"key": k, "value": {"doubleValue": v}} for k, v in fx["spans"][0]["attributes"].items()
             if isinstance(v, float)]
    good = {"traceId": TID.upper(), "spanId": "00f067aa0ba902b8", "parentSpanId": PARENT, "name": "llm_request",
            "kind": 2, "startTimeUnixNano": str(now - 10**8), "endTimeUnixNano": str(now), "attributes": attrs}
    nan = {**good, "spanId": "00f067aa0ba902b9", "attributes": [
        {"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": "NaN"}}]}
    future = {**good, "spanId": "00f067aa0ba902ba", "endTimeUnixNano": str(now + 3600 * 10**9)}
    request = {"resourceSpans": [{"scopeSpans": [{"spans": [good, nan, future, "junk"]}]}]}

    async def body(url: str) -> tuple[int, Any]:
        async with aiohttp.ClientSession() as s, s.post(url, json=request) as resp:
            return resp.status, await resp.json()

    status, answer = asyncio.run(run(rig, body))
    assert status == 200 and answer["partialSuccess"]["rejectedSpans"] == "3"
    [r] = rig.ready
    assert r.record == "otlp" and r.queue_s == pytest.approx(fx["expect"]["queue_s"], abs=2e-6)


def test_a_body_sent_too_slowly_is_cut_off_and_bodies_in_flight_are_bounded() -> None:
    rig = Rig(Joiner())
    proto = {"Content-Type": "application/x-protobuf"}

    async def trickle(n: int, pause: float) -> Any:
        for _ in range(n):
            yield b"\0" * 100
            await asyncio.sleep(pause)

    async def slow(url: str) -> int:
        async with aiohttp.ClientSession() as s, s.post(url, data=trickle(50, 0.05), headers=proto) as resp:
            return resp.status

    assert asyncio.run(run(rig, slow, settings=Settings(max_body_bytes=4096, body_timeout=0.3))) == 408

    async def three(url: str) -> list[int]:  # 3 x 3000 bytes at once: the budget is 2 x 4096
        async with aiohttp.ClientSession() as s:
            async def one() -> int:
                async with s.post(url, data=trickle(30, 0.02), headers=proto) as resp:
                    return resp.status
            return list(await asyncio.gather(one(), one(), one()))

    codes = asyncio.run(run(rig, three, settings=Settings(max_body_bytes=4096)))
    assert codes.count(503) == 1 and codes.count(400) == 2, codes  # zeros are not OTLP: the other two are read


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


def test_a_real_otlp_json_exporter_joins() -> None:
    """The OpenTelemetry JS SDK's OTLP/HTTP exporter sends OTLP JSON (hex ids, string int64s): it joins."""
    import os
    import subprocess

    tools = Path(__file__).resolve().parents[3] / ".tools" / "otel-js" / "node_modules"
    script = Path(__file__).resolve().parents[2] / "support" / "otlp_json_exporter.js"
    assert tools.is_dir(), "the JS exporter is missing: run scripts/setup.sh"
    rig = Rig(Joiner())
    rig.joiner.offer([(probe_result(), "otlp", "vllm")], now=time.time())
    seen: list[str] = []

    async def body(url: str) -> None:
        env = {**os.environ, "NODE_PATH": str(tools)}
        done = await asyncio.to_thread(subprocess.run, ["node", str(script), url, TID, PARENT,
                                                        str(int(time.time() * 1000) - 400)],
                                       env=env, capture_output=True, text=True, timeout=60)
        seen.append(done.stderr)
        assert done.returncode == 0, done.stderr

    asyncio.run(run(rig, body))
    [r] = rig.ready
    assert (r.record, r.queue_s, r.prefill_s, r.server_decode_s) == ("otlp", 0.001, 0.035, 0.3), seen
