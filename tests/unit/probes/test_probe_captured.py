"""Real llama-server responses, captured byte for byte (tests/fixtures/streams/SOURCE.md), through the probe.

Pure: the captured chunks with their captured arrival times through the result builder. Loopback: a server
writing the captured bytes verbatim at the captured offsets, closing each connection after the response as
llama-server did, probed back to back on one session.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from sloguard.model import ProbeResult
from sloguard.outcome import outcome
from sloguard.probes import PROBES
from sloguard.probes.job import ProbeJob
from sloguard.probes.openai import decode_chat
from sloguard.probes.stream import Stamps, assemble, make_session
from sloguard.probes.workload import Prompt
from tests.support.engine_streams import read_request

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "streams"
PROMPT = Prompt("Say hello.", 8, "short")


def capture(name: str) -> list[tuple[float, bytes]]:
    doc: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return [(ms, text.encode("latin-1")) for ms, text in doc["reads"]]


def body_reads(reads: list[tuple[float, bytes]]) -> list[tuple[int, bytes]]:
    """De-chunk the captured body: each chunk's data stamped by the read that completed it (ns)."""
    raw = b"".join(r for _, r in reads)
    ends, pos = [], 0
    for ms, r in reads:
        pos += len(r)
        ends.append((pos, int(ms * 1e6)))
    i = raw.index(b"\r\n\r\n") + 4
    out = []
    while True:
        eol = raw.index(b"\r\n", i)
        size = int(raw[i:eol], 16)
        if size == 0:
            return out
        start, i = eol + 2, eol + 2 + size + 2
        out.append((next(t for end, t in ends if end >= start + size), raw[start : start + size]))


def pure(name: str) -> tuple[ProbeResult, list[tuple[int, bytes]]]:
    reads = body_reads(capture(name))
    job = ProbeJob(name="p", target="t", api="chat", url="http://x", model="m")
    return assemble(job, PROMPT, "ab" * 16, 1.0, 200, Stamps(t0_ns=0), reads, decode_chat, False, None), reads


def at(reads: list[tuple[int, bytes]], marker: bytes, last: bool = False) -> float:
    found = [t for t, data in reads if marker in data]
    return (found[-1] if last else found[0]) * 1e-9


@pytest.mark.parametrize(("name", "tokens"), [("llamacpp-eos.json", 6), ("llamacpp-eos-2tokens.json", 2)])
def test_eos_ended_stream_ends_at_the_finish_chunk_so_tpot_is_exact(name: str, tokens: int) -> None:
    r, reads = pure(name)
    ttft, finish = at(reads, b'"content":"'), at(reads, b'"finish_reason":"stop"')
    assert (r.ok, r.output_tokens) == (True, tokens)
    assert (r.ttft_s, r.e2e_s) == (pytest.approx(ttft), pytest.approx(finish))
    assert r.tpot_s == pytest.approx((finish - ttft) / (tokens - 1))
    assert sum(r.itl_counts) == tokens - 1  # every token after the first, the EOS included


def test_length_cut_stream_ends_at_its_last_text() -> None:
    r, reads = pure("llamacpp-length.json")
    assert (r.ok, r.output_tokens) == (True, 6)
    assert r.e2e_s == pytest.approx(at(reads, b'"content":"', last=True))  # the finish chunk carries no token


def test_eos_only_answer_is_an_empty_success() -> None:
    r, reads = pure("llamacpp-eos-only.json")
    assert (r.ok, r.error, r.ttft_s, r.output_tokens, outcome(r)) == (True, None, None, 1, "empty")
    assert r.e2e_s == pytest.approx(at(reads, b'"finish_reason":"stop"'))


REPLAYED = ["llamacpp-eos.json", "llamacpp-eos-only.json", "llamacpp-length.json", "llamacpp-eos-2tokens.json"]


def _replay_server(ports: Any) -> None:
    """Serve REPLAYED in turn, one connection each, closing it after the response as llama-server did."""
    served: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        name = REPLAYED[len(served)]
        served.append(name)
        start = asyncio.get_running_loop().time()
        for ms, data in capture(name):
            await asyncio.sleep(max(0.0, start + ms / 1e3 - asyncio.get_running_loop().time()))
            if not data:  # the captured FIN
                break
            writer.write(data)
            await writer.drain()
        writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        ports.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def test_replayed_server_closing_after_each_response_back_to_back() -> None:
    """The server is its own process, as llama-server is: its FIN leaves at the captured time (22 us after the last
    byte) while a loaded host holds up the probe's process; served from the probe's own loop, it could not."""
    ctx = multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    server = ctx.Process(target=_replay_server, args=(ports,), daemon=True)
    server.start()
    try:
        port = ports.get(timeout=120)  # a hang guard: a loaded host can take seconds to start an interpreter

        async def scenario() -> list[ProbeResult]:
            job = ProbeJob(name="p", target="t", api="chat", url=f"http://127.0.0.1:{port}", model="m", timeout=10.0)
            async with make_session() as session:
                return [await PROBES["chat"](session, job, PROMPT) for _ in REPLAYED]

        results = asyncio.run(scenario())
    finally:
        server.kill()
        server.join(10)
    assert [(r.ok, r.error) for r in results] == [(True, None)] * 4
    assert [(outcome(r), r.output_tokens) for r in results] == [("success", 6), ("empty", 1), ("success", 6),
                                                                ("success", 2)]


@pytest.mark.parametrize("name", ["vllm-0.32-role-empty-length.json", "vllm-0.32-finish-apart.json"])
def test_vllm_shaped_stream_itl_is_exact(name: str) -> None:
    """Issue 48: a role chunk, three empty-text tokens and a length finish read ITL 20 ms within 2 %, not -9 %."""
    r, _ = pure(name)
    assert (r.ok, r.output_tokens) == (True, 20)
    assert r.itl_p50_s == pytest.approx(0.020, rel=0.02) and r.itl_max_s == pytest.approx(0.020, rel=0.02)
    assert r.tpot_s == pytest.approx(0.020, rel=0.02)
    assert sum(r.itl_counts) == 19
