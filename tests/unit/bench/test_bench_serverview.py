"""The server's view of a stage: histogram deltas over the window, gauges and counters; NVML samples."""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path

import pytest
from support.nvml_fake import FakeGPU, FakeNVML

from sloguard.bench.serverview import summarise_gpu, summarise_server
from sloguard.bench.watch import ServerWatch
from sloguard.config.spec import TargetSpec
from sloguard.model import Histogram, ModelView, ServerView

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "metrics" / "vllm-0.10-pre-rename.txt"


def view(ts: float, queue: tuple[float, float, float], waiting: float, preempt: float) -> ServerView:
    """A vLLM-like view with a queue histogram (counts at le=0.1, le=1, +Inf), one gauge, one counter."""
    h = Histogram(((0.1, queue[0]), (1.0, queue[1]), (float("inf"), queue[2])), queue[2], queue[2] * 0.2)
    m = ModelView("m", histograms={"queue": h}, gauges={"requests_waiting": waiting},
                  counters={"preemptions": preempt})
    return ServerView("sim", "vllm", ts, {"m": m})


def test_stage_view_is_the_delta_from_the_last_scrape_before_the_window() -> None:
    views = [view(0.0, (5, 5, 5), 9.0, 1.0), view(10.0, (10, 10, 10), 0.0, 2.0),  # before the window (10 s)
             view(11.0, (10, 20, 20), 4.0, 2.0), view(12.0, (10, 30, 30), 6.0, 5.0)]
    s = summarise_server(views, start=10.0)
    assert s is not None and s["engine"] == "vllm" and s["scrapes"] == 3 and s["seconds"] == 2.0
    q = s["histograms"]["queue"]
    assert q["count"] == 20 and 0.1 < q["p50"] <= 1.0  # the 20 requests of the window, all in (0.1, 1]
    assert s["gauges"]["requests_waiting"] == {"mean": 5.0, "max": 6.0}  # scrapes inside the window only
    assert s["counters"]["preemptions"] == 3.0


def test_no_scrape_inside_the_window_is_no_view() -> None:
    assert summarise_server([view(0.0, (1, 1, 1), 0.0, 0.0)], start=5.0) is None
    assert summarise_server([], start=0.0) is None


def test_counter_reset_counts_from_zero() -> None:
    s = summarise_server([view(0.0, (9, 9, 9), 0, 10.0), view(1.0, (2, 2, 2), 0, 3.0)], start=0.5)
    assert s is not None and s["counters"]["preemptions"] == 3.0 and s["histograms"]["queue"]["count"] == 2


def test_gpu_gauges_per_uuid() -> None:
    samples = [(1.0, {("sloguard_gpu_utilization_ratio", "GPU-a"): 0.5}),
               (2.0, {("sloguard_gpu_utilization_ratio", "GPU-a"): 0.9}),
               (9.0, {("sloguard_gpu_utilization_ratio", "GPU-a"): 0.0})]
    assert summarise_gpu(samples, 0.5, 5.0) == {"GPU-a": {"utilization_ratio": {"mean": pytest.approx(0.7),
                                                                                "max": 0.9}}}
    assert summarise_gpu(samples, 20.0, 30.0) is None


def test_watch_scrapes_the_target_and_samples_nvml(tmp_path: Path) -> None:
    page = tmp_path / "metrics.txt"
    shutil.copy(FIXTURE, page)
    target = TargetSpec(name="sim", engine="vllm", metrics_url=page.as_uri(), api_url="http://127.0.0.1:9")
    fake = FakeNVML([FakeGPU("GPU-0000", util=(87, 40))])

    async def run() -> ServerWatch:
        w = ServerWatch(target, None, interval=60.0, nvml_module=fake)
        w.start()
        while not w.gpu:  # the first periodic sample, whole: its scrape and then its NVML read (both in threads)
            await asyncio.sleep(0.01)
        await w.stop()  # between samples: the periodic loop is waiting, so stop adds exactly the final sample
        await w.close()
        return w
    w = asyncio.run(run())
    assert len(w.views) == len(w.gpu) == 2 and w.views[0].engine == "vllm" and not w.failures
    (uuid,) = {u for _, values in w.gpu for (_, u) in values}
    gpu = summarise_gpu(w.gpu, 0.0, float("inf"))
    assert gpu is not None and gpu[uuid]["utilization_ratio"]["mean"] == pytest.approx(0.87)


def test_a_stage_ending_during_a_slow_nvml_read_counts_it_busy(tmp_path: Path) -> None:
    """An NVML read still running when the stage ends (a busy host, a hung driver): the final sample keeps its
    scrape, counts the GPU read as busy and never waits for the thread."""
    page = tmp_path / "metrics.txt"
    shutil.copy(FIXTURE, page)
    target = TargetSpec(name="sim", engine="vllm", metrics_url=page.as_uri(), api_url="http://127.0.0.1:9")
    fake = FakeNVML([FakeGPU("GPU-0000")])
    fake.block = threading.Event()  # the first read's power getter waits here

    async def run() -> ServerWatch:
        w = ServerWatch(target, None, interval=60.0, nvml_module=fake)
        w.start()
        while not (w.views and fake.calls["nvmlDeviceGetPowerUsage"]):  # the scrape done, the NVML read stuck
            await asyncio.sleep(0.01)
        await w.stop()
        fake.block.set()
        await w.close()
        return w
    w = asyncio.run(run())
    assert len(w.views) == 2 and w.gpu == [] and w.failures == {"nvml_busy": 1}


def test_watch_counts_scrape_failures() -> None:
    target = TargetSpec(name="sim", engine="vllm", metrics_url="file:///nonexistent/metrics", api_url="http://x:1")

    async def run() -> ServerWatch:
        w = ServerWatch(target, None, interval=60.0, nvml=False)
        await w.sample()
        await w.close()
        return w
    w = asyncio.run(run())
    assert w.views == [] and w.failures == {"connect": 1}


@pytest.mark.parametrize(("counters", "share"), [
    ({"prefix_cache_hits": 181.0, "prefix_cache_queries": 182.0}, 181 / 182),  # vLLM, SGLang; llama.cpp cached/all
    ({"prompt_tokens_computed": 20.0, "prompt_tokens": 200.0}, 0.9),  # vLLM 0.32 prompt_tokens_by_source only
    ({"prompt_tokens": 200.0}, None),
])
def test_cache_share_from_each_engines_counters(counters: dict[str, float], share: float | None) -> None:
    from sloguard.bench.serverview import cache_share

    assert cache_share({"counters": counters}) == (None if share is None else pytest.approx(share))


def test_a_stage_served_from_the_prompt_cache_is_warned_about() -> None:
    from sloguard.bench.serverview import cache_warnings

    rows = [{"stage": 0, "server": {"counters": {"prefix_cache_hits": 10.0, "prefix_cache_queries": 1000.0}}},
            {"stage": 1, "server": {"counters": {"prefix_cache_hits": 990.0, "prefix_cache_queries": 1000.0}}},
            {"stage": 2, "server": None}]
    warnings = cache_warnings(rows)
    assert len(warnings) == 1 and "stage 1: 99%" in warnings[0] and "--same-prompts" in warnings[0]
