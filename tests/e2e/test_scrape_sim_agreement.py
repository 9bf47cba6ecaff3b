"""Server TTFT over a 1-minute window agrees with the simulator's own record of every first token."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from sloguard import histogram
from sloguard.clock import FakeClock
from sloguard.config.spec import TargetSpec
from sloguard.model import Histogram
from sloguard.sim.metrics import TTFT_BUCKETS
from sloguard.sim.server import build_app, make_simulator
from sloguard.sources.scrape import ScrapeSource
from sloguard.windows.server import ServerWindows

pytestmark = pytest.mark.e2e
SCRAPES, WINDOW = 75, 60.0


async def _scenario() -> dict[str, Any]:
    sim = make_simulator(seed=7, background_rps=10.0)
    recorded: list[float] = []
    ttft = sim.metrics._hist["ttft"]
    observe = ttft.observe
    ttft.observe = lambda v, *a, **k: (recorded.append(v), observe(v, *a, **k))[1]  # type: ignore[method-assign]
    render = sim.metrics.render
    seen_at_render: list[int] = []
    sim.metrics.render = lambda: (seen_at_render.append(len(recorded)), render())[1]  # type: ignore[method-assign]
    runner = web.AppRunner(build_app(sim))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    clock = FakeClock(1_700_000_000.0)
    src = ScrapeSource(TargetSpec(name="sim", engine="vllm", metrics_url=f"http://127.0.0.1:{port}/metrics"),
                       clock=clock)
    windows = ServerWindows(windows=(WINDOW,), max_age=600.0)
    points: list[tuple[float, int]] = []
    try:
        for _ in range(SCRAPES):
            out = await src.collect()
            windows.add(out.payload)  # type: ignore[arg-type]
            points.append((clock.now(), seen_at_render[-1]))
            await asyncio.sleep(0.2)
            clock.advance(1.0)
    finally:
        await src.close()
        await runner.cleanup()
    now = points[-1][0]
    base_count = max(c for ts, c in points if ts <= now - WINDOW)
    return {"hist": windows.histogram("sim", None, "ttft", WINDOW, now), "expected": recorded[base_count:points[-1][1]],
            "families": windows.families(now)}


def test_server_ttft_window_matches_simulator_record() -> None:
    res = asyncio.run(_scenario())
    h: Histogram | None = res["hist"]
    expected = np.array(res["expected"])
    assert h is not None and len(expected) > 50
    assert h.count == len(expected)
    for edge in TTFT_BUCKETS:  # exact at every bucket edge
        frac = histogram.fraction_le(h, edge)
        assert frac is not None and frac[1] is True
        assert frac[0] == pytest.approx(float(np.mean(expected <= edge)), abs=1e-12)
    edges = (0.0, *TTFT_BUCKETS, float("inf"))
    exported = {s.labels["quantile"]: s.value for f in res["families"] for s in f.samples
                if s.name == "sloguard_server_ttft_seconds" and s.labels.get("window") == "1m"}
    for q in (0.5, 0.9, 0.95, 0.99):
        ours = histogram.quantile(q, h)
        truth = float(np.quantile(expected, q, method="inverted_cdf"))
        assert ours is not None
        # Interpolation inside a bucket cannot do better than the bucket: both lie in the same one.
        bucket = next(i for i in range(1, len(edges)) if truth <= edges[i])
        assert edges[bucket - 1] <= ours <= edges[bucket], (q, ours, truth)
        assert exported[f"{q:g}"] == pytest.approx(ours)
