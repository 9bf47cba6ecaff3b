"""The server's view of a stage: histogram deltas over the window, gauges and counters; NVML samples."""

from __future__ import annotations

import asyncio
import shutil
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
        for _ in range(1000):  # the first periodic sample (its file read runs in a thread)
            if w.views:
                break
            await asyncio.sleep(0.01)
        await w.stop()  # the periodic sample at start plus the final one
        await w.close()
        return w
    w = asyncio.run(run())
    assert len(w.views) == 2 and w.views[0].engine == "vllm" and not w.failures
    (uuid,) = {u for _, values in w.gpu for (_, u) in values}
    gpu = summarise_gpu(w.gpu, 0.0, float("inf"))
    assert gpu is not None and gpu[uuid]["utilization_ratio"]["mean"] == pytest.approx(0.87)


def test_watch_counts_scrape_failures() -> None:
    target = TargetSpec(name="sim", engine="vllm", metrics_url="file:///nonexistent/metrics", api_url="http://x:1")

    async def run() -> ServerWatch:
        w = ServerWatch(target, None, interval=60.0, nvml=False)
        await w.sample()
        await w.close()
        return w
    w = asyncio.run(run())
    assert w.views == [] and w.failures == {"connect": 1}
