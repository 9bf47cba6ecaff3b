"""The simulator served in-process on a loopback port, exercised with an aiohttp client."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.siminproc import FAST, run

from sloguard.sim import server as sim_server
from sloguard.sim.server import start

pytestmark = pytest.mark.e2e

Scenario = Callable[[aiohttp.ClientSession, str], Awaitable[None]]
CHAT = "/v1/chat/completions"
VLLM_FAMILIES = {
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
    "vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
    "vllm:request_inference_time_seconds", "vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
    "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success", "vllm:num_preemptions",
    "vllm:iteration_tokens_total", "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
}


def chat_body(max_tokens: int = 8, **extra: Any) -> dict[str, Any]:
    return {"model": "sim-llama-3-8b", "messages": [{"role": "user", "content": "x" * 400}],
            "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}, **extra}


async def read_events(resp: aiohttp.ClientResponse) -> list[tuple[float, str]]:
    """Return (arrival monotonic time, data payload) of every SSE event."""
    events: list[tuple[float, str]] = []
    async for line in resp.content:
        if line.startswith(b"data: "):
            events.append((time.monotonic(), line[6:].decode().strip()))
    return events


async def stream_chat(session: aiohttp.ClientSession, base: str, **body: Any) -> dict[str, Any]:
    """Send one streaming chat request; return client TTFT, events and the server's timeline."""
    t0 = time.monotonic()
    async with session.post(base + CHAT, json=chat_body(**body)) as resp:
        assert resp.status == 200
        rid = resp.headers["x-sim-request-id"]
        events = await read_events(resp)
    token_times = [t for t, d in events if d != "[DONE]" and json.loads(d).get("choices")
                   and json.loads(d)["choices"][0]["delta"].get("content")]
    async with session.get(f"{base}/sim/requests/{rid}") as r:
        server = await r.json()
    return {"ttft": token_times[0] - t0 if token_times else None, "events": events, "server": server}


def test_streaming_chat_has_vllm_chunk_sequence() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        out = await stream_chat(s, base, max_tokens=6)
        data = [d for _, d in out["events"]]
        assert data[-1] == "[DONE]"
        chunks = [json.loads(d) for d in data[:-1]]
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        content = chunks[1:-1]
        assert all(c["object"] == "chat.completion.chunk" for c in content)
        assert [c["choices"][0]["finish_reason"] for c in content] == [None] * 5 + ["length"]
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 6
        assert out["server"]["output_tokens"] == 6 and out["server"]["finish_reason"] == "length"
    run(scenario)


def test_streaming_completions_has_no_role_chunk_and_no_usage_unless_asked() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        body = {"prompt": [1] * 50, "max_tokens": 4, "ignore_eos": True, "stream": True}
        async with s.post(base + "/v1/completions", json=body) as resp:
            data = [d for _, d in await read_events(resp)]
        chunks = [json.loads(d) for d in data[:-1]]
        assert data[-1] == "[DONE]" and len(chunks) == 4
        assert all(c["object"] == "text_completion" and c["choices"][0]["text"] for c in chunks)
    run(scenario)


@pytest.mark.parametrize(("path", "body", "obj"), [
    (CHAT, {"messages": [{"role": "user", "content": "hi"}]}, "chat.completion"),
    ("/v1/completions", {"prompt": "hi"}, "text_completion"),
])
def test_non_streaming_returns_usage(path: str, body: dict[str, Any], obj: str) -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        async with s.post(base + path, json={**body, "max_tokens": 5, "ignore_eos": True}) as resp:
            out = await resp.json()
        assert out["object"] == obj and out["usage"]["completion_tokens"] == 5
        assert out["choices"][0]["finish_reason"] == "length"
    run(scenario)


def test_models_lists_the_served_model() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        async with s.get(base + "/v1/models") as resp:
            assert [m["id"] for m in (await resp.json())["data"]] == ["custom-model"]
    run(scenario, model="custom-model")


def test_metrics_parse_and_agree_with_client() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        out = await stream_chat(s, base, max_tokens=4)
        async with s.get(base + "/metrics") as resp:
            text = await resp.text()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert families.keys() >= VLLM_FAMILIES
        ttft = {smp.name: smp for smp in families["vllm:time_to_first_token_seconds"].samples
                if smp.name.endswith(("_sum", "_count"))}
        assert ttft["vllm:time_to_first_token_seconds_count"].labels == {"engine": "0",
                                                                       "model_name": "sim-llama-3-8b"}
        server_ttft = ttft["vllm:time_to_first_token_seconds_sum"].value
        assert server_ttft == pytest.approx(out["server"]["first_token_s"])
        assert out["ttft"] == pytest.approx(server_ttft, abs=0.020)
    run(scenario)


def test_stall_fault_moves_ttft_by_the_stall_and_delete_clears_it() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        base_ttft = (await stream_chat(s, base, max_tokens=2))["ttft"]
        async with s.post(base + "/sim/faults", json={"stall_first_token_s": 0.4}) as r:
            assert (await r.json())["stall_first_token_s"] == 0.4
        stalled = await stream_chat(s, base, max_tokens=2)
        assert stalled["ttft"] - base_ttft == pytest.approx(0.4, abs=0.05)
        assert stalled["ttft"] == pytest.approx(stalled["server"]["first_token_s"], abs=0.020)
        assert stalled["server"]["stall_s"] == 0.4
        async with s.delete(base + "/sim/faults") as r:
            assert (await r.json())["stall_first_token_s"] == 0.0
        assert (await stream_chat(s, base, max_tokens=2))["ttft"] < 0.2
    run(scenario)


def test_latency_multiplier_scales_ttft_and_profile_reports_it() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        before = (await stream_chat(s, base, max_tokens=2))["server"]["first_token_s"]
        await s.post(base + "/sim/faults", json={"latency_multiplier": 5})
        after = (await stream_chat(s, base, max_tokens=2))["server"]["first_token_s"]
        assert after / before == pytest.approx(5, rel=0.2)
        async with s.get(base + "/sim/profile") as r:
            profile = await r.json()
        assert profile["faults"]["latency_multiplier"] == 5 and profile["profile"]["prefill_base_s"] == 0.010
        assert profile["seed"] == 7 and profile["background_mix"]
    run(scenario)


def test_background_load_fills_histograms_without_clients() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        await asyncio.sleep(0.5)
        async with s.get(base + "/metrics") as resp:
            fams = {f.name: f for f in text_string_to_metric_families(await resp.text())}
        counts = [smp.value for smp in fams["vllm:time_to_first_token_seconds"].samples
                  if smp.name.endswith("_count")]
        assert counts[0] > 0
    run(scenario, background_rps=40.0, time_scale=0.1)


@pytest.mark.parametrize("body", [{"bogus": 1}, {"error_rate": 2}, {"hang": "yes"}, [1]])
def test_bad_faults_are_rejected(body: Any) -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        async with s.post(base + "/sim/faults", json=body) as r:
            assert r.status == 400 and "error" in await r.json()
    run(scenario)


def test_error_rate_answers_openai_error() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        await s.post(base + "/sim/faults", json={"error_rate": 1.0})
        async with s.post(base + CHAT, json=chat_body()) as resp:
            assert resp.status == 500
            assert (await resp.json())["error"]["code"] == 500
    run(scenario)


def test_midstream_error_sends_error_event_without_done() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        await s.post(base + "/sim/faults", json={"midstream_error_rate": 1.0})
        out = await stream_chat(s, base, max_tokens=6)
        data = [d for _, d in out["events"]]
        assert data[-1] == "[DONE]" and "error" in json.loads(data[-2])
        await asyncio.sleep(0.2)  # the request leaves the batch when the step in flight ends
        async with s.get(f"{base}/sim/requests/{out['server']['id']}") as r:
            assert (await r.json())["finish_reason"] == "error"
    run(scenario)


@pytest.mark.parametrize(("mode", "ctype"), [(True, "text/html"), ("binary", "application/octet-stream")])
def test_garbage_metrics(mode: bool | str, ctype: str) -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        await s.post(base + "/sim/faults", json={"garbage_metrics": mode})
        async with s.get(base + "/metrics") as resp:
            assert resp.status == 200 and resp.content_type == ctype
            assert b"vllm:" not in await resp.read()
    run(scenario)


def test_hang_times_out_the_client_and_leaks_no_task() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        before = len(asyncio.all_tasks())
        await s.post(base + "/sim/faults", json={"hang": True})
        with pytest.raises(asyncio.TimeoutError):
            await s.post(base + CHAT, json=chat_body(), timeout=aiohttp.ClientTimeout(total=0.3))
        for _ in range(50):
            if len(asyncio.all_tasks()) <= before:
                break
            await asyncio.sleep(0.02)
        assert len(asyncio.all_tasks()) <= before
    run(scenario)


def test_shutdown_ends_hangs_and_open_streams_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # With a 30 s shutdown timeout, "at once" and "waited out the timeout" are far apart even on a busy CI box.
    monkeypatch.setattr(sim_server, "SHUTDOWN_TIMEOUT_S", 30.0)

    async def main() -> float:
        runner, port = await start("127.0.0.1", 0, seed=1, **FAST)
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as s:
            async with s.post(base + CHAT, json=chat_body(max_tokens=5000)) as streaming:
                await streaming.content.readline()
                await s.post(base + "/sim/faults", json={"hang": True})
                hanging = asyncio.ensure_future(s.post(base + CHAT, json=chat_body()))
                await asyncio.sleep(0.1)
                t0 = time.monotonic()
                await runner.cleanup()
                took = time.monotonic() - t0
                assert b"[DONE]" not in await streaming.content.read()
            assert (await hanging).status == 503
        return took

    assert asyncio.run(main()) < 10.0


def test_client_disconnect_aborts_the_request() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        async with s.post(base + CHAT, json=chat_body(max_tokens=500)) as resp:
            rid = resp.headers["x-sim-request-id"]
            await resp.content.readline()
        await asyncio.sleep(0.1)
        async with s.get(f"{base}/sim/requests/{rid}") as r:
            assert (await r.json())["finish_reason"] == "abort"
    run(scenario)


@pytest.mark.parametrize(("body", "status"), [
    ({"model": "other", "messages": [{"role": "user", "content": "hi"}]}, 404),
    ({"messages": []}, 400),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, 400),
])
def test_invalid_requests(body: dict[str, Any], status: int) -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        async with s.post(base + CHAT, json=body) as resp:
            assert resp.status == status and (await resp.json())["error"]["code"] == status
    run(scenario)


def test_cli_prints_url_and_exits_zero_on_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "sloguard.sim", "--listen", "127.0.0.1:0", "--seed", "3"],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
