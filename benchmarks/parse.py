"""Parse and scrape cost: sloguard's parser vs prometheus_client's on the vLLM page; scrape+normalise CPU.

Run: .venv/bin/python benchmarks/parse.py [--page FILE] [--scrapes N]
Prints a table: lines/s and ms per page for both parsers, the speed-up, and the CPU time (process_time)
of one ScrapeSource.collect() against a loopback aiohttp server serving the page, with how many targets
one core can scrape every 15 s at that cost.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import timeit
from pathlib import Path

from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from sloguard.config.spec import TargetSpec
from sloguard.sources.parse import parse_text
from sloguard.sources.scrape import ScrapeSource

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SLOGUARD_SHARED_DIR") or REPO / ".." / "shared").resolve()
PAGE = SHARED / "fixtures" / "metrics" / "vllm-v1-dynamo-2026-01.txt"


def per_page(fn: object, text: str, number: int) -> float:
    """Best-of-7 seconds per call."""
    return min(timeit.repeat(lambda: fn(text), number=number, repeat=7)) / number  # type: ignore[operator]


def oracle(text: str) -> int:
    return sum(len(f.samples) for f in text_string_to_metric_families(text))


async def scrape_cpu(text: str, scrapes: int) -> float:
    """CPU seconds per ScrapeSource.collect() (HTTP client, parse, normalise) against a loopback server."""
    body = text.encode()

    async def handle(_: web.Request) -> web.Response:
        return web.Response(body=body, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    src = ScrapeSource(TargetSpec(name="bench", metrics_url=f"http://127.0.0.1:{port}/metrics"))
    try:
        for _ in range(20):
            await src.collect()
        # Server and client share this process: time the server's share separately and subtract it.
        start = time.process_time()
        for _ in range(scrapes):
            await src.collect()
        total = time.process_time() - start
        start = time.process_time()
        for _ in range(scrapes):
            await handle(None)  # type: ignore[arg-type]
        server = time.process_time() - start
    finally:
        await src.close()
        await runner.cleanup()
    return (total - server) / scrapes


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--page", type=Path, default=PAGE)
    ap.add_argument("--scrapes", type=int, default=300)
    args = ap.parse_args(argv)
    text = args.page.read_text()
    lines = text.count("\n") + 1
    ours = per_page(parse_text, text, 50)
    theirs = per_page(oracle, text, 5)
    cpu = asyncio.run(scrape_cpu(text, args.scrapes))
    print(f"page: {args.page.name}, {lines} lines, {len(parse_text(text))} samples, {len(text)} bytes")
    print(f"{'parser':<28}{'lines/s':>12}{'ms/page':>10}")
    print(f"{'sloguard.sources.parse':<28}{lines / ours:>12,.0f}{ours * 1000:>10.3f}")
    print(f"{'prometheus_client.parser':<28}{lines / theirs:>12,.0f}{theirs * 1000:>10.3f}")
    print(f"speed-up: {theirs / ours:.1f}x")
    print(f"scrape+normalise CPU per target per scrape: {cpu * 1000:.2f} ms "
          f"-> one core at 15 s interval: {15 / cpu:,.0f} targets (100% core), {0.5 * 15 / cpu:,.0f} at 50%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
