"""The simulator served in-process on a loopback port, exercised with an aiohttp client.

Client and server share one event loop on a CI machine that may be busy: assertions compare the simulator's own
model times (`prefill_step_s`) or use causal bounds (the client cannot see a token before the server emits it),
never wall-clock ratios or tight tolerances. Timing accuracy is measured in benchmarks/probe_timing.py.
"""

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
SLACK_S = 2.0  # upper bound on a busy host's event-loop lag between the server's stamp and the client's read
HANG_GUARD_S = 30.0  # how long to poll for an event that a working simulator produces in milliseconds
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
        # The client sends before the server receives and reads after the server stamps: never earlier.
        assert server_ttft - 1e-3 <= out["ttft"] < server_ttft + SLACK_S
    run(scenario)


def test_stall_fault_moves_ttft_by_the_stall_and_delete_clears_it() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        assert (await stream_chat(s, base, max_tokens=2))["server"]["stall_s"] == 0.0
        async with s.post(base + "/sim/faults", json={"stall_first_token_s": 0.4}) as r:
            assert (await r.json())["stall_first_token_s"] == 0.4
        stalled = await stream_chat(s, base, max_tokens=2)
        server = stalled["server"]
        assert server["stall_s"] == 0.4
        # The stall is inside TTFT: first token no sooner than the stall plus the model's prefill step.
        assert server["first_token_s"] >= 0.4 + server["prefill_step_s"] - 1e-3
        assert server["first_token_s"] - 1e-3 <= stalled["ttft"] < server["first_token_s"] + SLACK_S
        async with s.delete(base + "/sim/faults") as r:
            assert (await r.json())["stall_first_token_s"] == 0.0
        assert (await stream_chat(s, base, max_tokens=2))["server"]["stall_s"] == 0.0
    run(scenario)


def test_latency_multiplier_scales_ttft_and_profile_reports_it() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        # The model's own prefill step, not first_token_s: wall-clock TTFT on a busy host gave 3.99x, not 5x.
        before = (await stream_chat(s, base, max_tokens=2))["server"]["prefill_step_s"]
        await s.post(base + "/sim/faults", json={"latency_multiplier": 5})
        after = (await stream_chat(s, base, max_tokens=2))["server"]["prefill_step_s"]
        assert before == pytest.approx(0.010 + 0.0001 * 103)  # FAST profile, no jitter: 400 bytes + template
        assert after / before == pytest.approx(5)
        async with s.get(base + "/sim/profile") as r:
            profile = await r.json()
        assert profile["faults"]["latency_multiplier"] == 5 and profile["profile"]["prefill_base_s"] == 0.010
        assert profile["seed"] == 7 and profile["background_mix"]
    run(scenario)


def test_background_load_fills_histograms_without_clients() -> None:
    async def ttft_count(s: aiohttp.ClientSession, base: str) -> float:
        async with s.get(base + "/metrics") as resp:
            fams = {f.name: f for f in text_string_to_metric_families(await resp.text())}
        return next(smp.value for smp in fams["vllm:time_to_first_token_seconds"].samples
                    if smp.name.endswith("_count"))

    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        end = time.monotonic() + HANG_GUARD_S
        while await ttft_count(s, base) == 0 and time.monotonic() < end:
            await asyncio.sleep(0.1)
        assert await ttft_count(s, base) > 0
    run(scenario, background_rps=40.0, time_scale=0.1)


def test_arrivals_lists_the_background_users_arrivals_in_wall_time() -> None:
    """The truth a benchmark tells a burst of the users' own from a fault by: each arrival as it came, in order."""
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        start = time.time()
        end = time.monotonic() + HANG_GUARD_S
        got: list[float] = []
        while len(got) < 5 and time.monotonic() < end:
            await asyncio.sleep(0.1)
            async with s.get(base + "/sim/arrivals") as r:
                got = (await r.json())["background"]
        assert len(got) >= 5 and got == sorted(got)
        assert start - SLACK_S <= got[0] and got[-1] <= time.time()
    run(scenario, background_rps=40.0, time_scale=0.1)


def test_arrivals_is_empty_without_background_load() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        await asyncio.sleep(0.2)
        async with s.get(base + "/sim/arrivals") as r:
            assert (await r.json()) == {"background": []}
    run(scenario, background_rps=0.0)


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


async def timeline(s: aiohttp.ClientSession, base: str, rid: str) -> dict[str, Any]:
    async with s.get(f"{base}/sim/requests/{rid}") as r:
        got: dict[str, Any] = await r.json()
        return got


def test_midstream_error_sends_error_event_without_done() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        await s.post(base + "/sim/faults", json={"midstream_error_rate": 1.0})
        out = await stream_chat(s, base, max_tokens=6)
        data = [d for _, d in out["events"]]
        assert data[-1] == "[DONE]" and "error" in json.loads(data[-2])
        # the request leaves the batch when the step in flight ends, a model step (ms) after the error event
        deadline = time.monotonic() + HANG_GUARD_S
        while (server := await timeline(s, base, out["server"]["id"]))["finish_reason"] is None:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert server["finish_reason"] == "error"
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
        end = time.monotonic() + HANG_GUARD_S
        while len(asyncio.all_tasks()) > before and time.monotonic() < end:
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

        async def reason() -> str | None:
            async with s.get(f"{base}/sim/requests/{rid}") as r:
                return (await r.json())["finish_reason"]  # type: ignore[no-any-return]

        end = time.monotonic() + HANG_GUARD_S
        while await reason() is None and time.monotonic() < end:
            await asyncio.sleep(0.02)
        assert await reason() == "abort"
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
        assert proc.wait(timeout=HANG_GUARD_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
