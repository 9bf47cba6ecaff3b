"""The simulator's unhappy paths: cancel at the next step, leak_on_cancel, the context length and its faults,
speculative-decoding counters and the prefix-hit knob, served in-process and read through /metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.procs import PATIENCE
from support.siminproc import run

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"


def body(max_tokens: int = 8, chars: int = 400) -> dict[str, Any]:
    return {"model": "sim-llama-3-8b", "messages": [{"role": "user", "content": "x" * chars}],
            "max_tokens": max_tokens, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}


async def metric(s: aiohttp.ClientSession, base: str, name: str, **labels: str) -> float:
    async with s.get(base + "/metrics") as r:
        text = await r.text()
    return sum(x.value for fam in text_string_to_metric_families(text) for x in fam.samples
               if x.name == name and labels.items() <= x.labels.items())


async def counts(s: aiohttp.ClientSession, base: str) -> tuple[float, float]:
    """Return prefix-cache hits and queries from one scrape (read from two, a busy server's gave 0.074 and 0.115)."""
    async with s.get(base + "/metrics") as r:
        text = await r.text()
    got = {x.name: x.value for fam in text_string_to_metric_families(text) for x in fam.samples}
    return got["vllm:prefix_cache_hits_total"], got["vllm:prefix_cache_queries_total"]


async def timeline(s: aiohttp.ClientSession, base: str, rid: str) -> dict[str, Any]:
    async with s.get(f"{base}/sim/requests/{rid}") as r:
        got: dict[str, Any] = await r.json()
        return got


async def disconnect_after_first_token(s: aiohttp.ClientSession, base: str, max_tokens: int) -> str:
    async with s.post(base + CHAT, json=body(max_tokens)) as resp:
        rid = resp.headers["x-sim-request-id"]
        while b"content" not in await resp.content.readline():  # role chunk, then the first token
            pass
    return rid


async def wait_for(check: Callable[[], Awaitable[bool]], timeout: float) -> None:
    deadline = time.monotonic() + timeout * PATIENCE  # a hang guard, scaled for a busy host like every wait
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_a_cancelled_request_leaves_the_batch_at_the_next_step() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        rid = await disconnect_after_first_token(s, base, 5000)

        async def finished() -> bool:
            return (await timeline(s, base, rid))["finish_reason"] is not None
        await wait_for(finished, 10.0)
        t = await timeline(s, base, rid)
        assert t["finish_reason"] == "abort"
        assert t["output_tokens"] < 200  # nowhere near its 5000 (loop scheduling may let a few steps run)
        assert await metric(s, base, "vllm:num_requests_running") == 0
        assert await metric(s, base, "vllm:request_success_total", finished_reason="abort") == 1
    run(scenario)


def test_leak_on_cancel_keeps_generating_for_nobody() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        await s.post(base + "/sim/faults", json={"leak_on_cancel": True})
        rid = await disconnect_after_first_token(s, base, 300)
        await asyncio.sleep(0.2)
        assert await metric(s, base, "vllm:num_requests_running") == 1  # the slot is still held

        async def finished() -> bool:
            return (await timeline(s, base, rid))["finish_reason"] is not None
        await wait_for(finished, 30.0)
        t = await timeline(s, base, rid)
        assert (t["finish_reason"], t["output_tokens"]) == ("length", 300)  # its full length
        assert await metric(s, base, "vllm:request_success_total", finished_reason="abort") == 0
        assert await metric(s, base, "vllm:num_requests_running") == 0
    run(scenario)


def test_context_length_is_enforced_with_a_fast_400_and_served_in_v1_models() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        async with s.get(base + "/v1/models") as r:
            assert (await r.json())["data"][0]["max_model_len"] == 1024
        async with s.post(base + CHAT, json=body(16, chars=4 * 1100)) as resp:
            err = (await resp.json())["error"]
            assert resp.status == 400 and err["code"] == 400
            assert err["message"].startswith("This model's maximum context length is 1024 tokens.")
        async with s.post(base + CHAT, json=body(16, chars=4 * 900)) as resp:
            assert resp.status == 200
            await resp.read()
    run(scenario, max_model_len=1024)


def test_oversized_prompt_faults_hang_truncate_and_slow_reject() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        await s.post(base + "/sim/faults", json={"oversized_prompt": "hang"})
        async with s.post(base + CHAT, json=body(16, chars=4 * 2000)) as resp:
            assert resp.status == 200  # accepted ...
            with pytest.raises(TimeoutError):  # ... and nothing comes
                await asyncio.wait_for(resp.content.readline(), 0.3)
        await s.post(base + "/sim/faults", json={"oversized_prompt": "truncate"})
        async with s.post(base + CHAT, json=body(16, chars=4 * 2000)) as resp:
            text = (await resp.read()).decode()
            assert resp.status == 200 and '"prompt_tokens":1008' in text  # cut to 1024 - 16, silently
        await s.post(base + "/sim/faults", json={"oversized_prompt": "reject", "oversized_reject_delay_s": 0.3})
        t0 = time.monotonic()
        async with s.post(base + CHAT, json=body(16, chars=4 * 2000)) as resp:
            assert resp.status == 400 and time.monotonic() - t0 >= 0.3
    run(scenario, max_model_len=1024)


def test_spec_decode_counters_follow_the_acceptance_knob() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        await s.post(base + "/sim/faults", json={"spec_acceptance": 0.5})
        async with s.post(base + CHAT, json=body(400)) as resp:
            await resp.read()
        drafts = await metric(s, base, "vllm:spec_decode_num_drafts_total")
        draft = await metric(s, base, "vllm:spec_decode_num_draft_tokens_total")
        accepted = await metric(s, base, "vllm:spec_decode_num_accepted_tokens_total")
        assert drafts == 399 and draft == 3 * 399  # one draft per decode step after the first token
        # accepted per draft = p + p² + p³ = 0.875 at p = 0.5: 399 drafts put the mean within ±0.15 (>4 sigma)
        assert accepted / drafts == pytest.approx(0.875, abs=0.15)
        assert await metric(s, base, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position="0") > 0
    run(scenario, spec_tokens=3)


def test_prefix_hit_ratio_knob_sets_the_background_hits() -> None:
    async def scenario(s: aiohttp.ClientSession, base: str) -> None:
        # The ratio is drawn when a prompt arrives and counted at its first token: pause the background and
        # let every prompt of the profile's own ratio (0.25) finish (the engine's gauges say when), then count
        # from the knob on, hits and queries from one scrape.
        await s.post(base + "/sim/faults", json={"load_multiplier": 0.0})

        async def drained() -> bool:
            return await metric(s, base, "vllm:num_requests_running") + await metric(
                s, base, "vllm:num_requests_waiting") == 0
        await wait_for(drained, 30.0)
        hits0, queries0 = await counts(s, base)
        await s.post(base + "/sim/faults", json={"prefix_hit_ratio": 0.1, "load_multiplier": 1.0})

        async def enough() -> bool:
            return (await counts(s, base))[1] > queries0 + 5000
        await wait_for(enough, 30.0)
        hits, queries = (now - then for now, then in zip(await counts(s, base), (hits0, queries0), strict=True))
        assert hits / queries == pytest.approx(0.1, abs=0.01)  # int(prompt × 0.1) per background prompt

    run(scenario, background_rps=20.0)
