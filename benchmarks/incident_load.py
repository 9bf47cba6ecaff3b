"""The users' load for benchmarks/record_incidents.py: open-loop Poisson or closed-loop streams, bounded in time.

Run as its own process (so its event loop never shares the daemon's GIL):
    .venv/bin/python benchmarks/incident_load.py URL MODEL --rate 2 --prompt 64 --max-tokens 16 --duration 60
    .venv/bin/python benchmarks/incident_load.py URL MODEL --streams 16 ...
Prints one JSON line at the end: requests sent, finished, failed. Sends only to the URL given (loopback or a
namespace this session made).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sloguard.probes.workload import filler


async def _one(session: aiohttp.ClientSession, url: str, model: str, prompt: str, max_tokens: int,
               counts: dict[str, int]) -> None:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "stream": True, "ignore_eos": True}
    counts["sent"] += 1
    try:
        async with session.post(f"{url}/v1/chat/completions", json=body) as resp:
            async for _ in resp.content.iter_any():
                pass
            counts["ok" if resp.status == 200 else "failed"] += 1
    except (aiohttp.ClientError, TimeoutError):
        counts["failed"] += 1


async def run(args: argparse.Namespace) -> dict[str, int]:
    """Send the load until the duration ends; return the counts."""
    rng = random.Random(args.seed)
    counts = {"sent": 0, "ok": 0, "failed": 0}
    end = time.monotonic() + args.duration
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:
        def prompt() -> str:
            return filler(args.prompt, nonce=f"{rng.random():.12f}")  # salted: no engine prompt cache hits

        if args.streams:
            async def stream() -> None:
                while time.monotonic() < end:
                    await _one(session, args.url, args.model, prompt(), args.max_tokens, counts)
            await asyncio.gather(*(stream() for _ in range(args.streams)))
        else:
            tasks: set[asyncio.Task[None]] = set()
            while (now := time.monotonic()) < end:
                task = asyncio.create_task(_one(session, args.url, args.model, prompt(), args.max_tokens, counts))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                await asyncio.sleep(min(rng.expovariate(args.rate), max(0.0, end - now)))
            if tasks:
                await asyncio.wait(tasks, timeout=args.timeout)
    return counts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("model")
    p.add_argument("--rate", type=float, default=1.0, help="open loop: Poisson requests/s")
    p.add_argument("--streams", type=int, default=0, help="closed loop: this many streams instead")
    p.add_argument("--prompt", type=int, default=64, help="prompt tokens (approximate)")
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start-at", type=float, default=0.0, help="Unix time to begin at (a loaded machine takes "
                   "seconds to start a Python process: start it early and let it wait)")
    args = p.parse_args()
    if (wait := args.start_at - time.time()) > 0:
        time.sleep(wait)
    print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
