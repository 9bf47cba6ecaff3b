"""Probe timing error: client receive stamp - server send stamp, per SSE event, over loopback.

A loopback SSE server (its own process) stamps `perf_counter_ns()` into each event just before writing it;
the probe side (its own process, like the daemon's probe process) runs sloguard's `fetch` with the same
incremental split + JSON decode per read as every probe (`Events`), so each event's arrival stamp (the
kernel's receive stamp on Linux, see sloguard/probes/rxstamp.py and arrival.py) is compared with its
send stamp. On Linux `perf_counter_ns` is CLOCK_MONOTONIC, one clock for every process. "late" counts reads
the arrival hook missed (stamped at coroutine resume instead); it must be 0.

Rows: 1, 16 and 64 concurrent streams, idle and while this process (the "daemon") holds 10k series in a
prometheus_client registry whose /metrics is scraped every second; plus one row with the probe loop in
the daemon process (a thread) to show what the separate process buys, and "raw floor" rows: a bare
asyncio.Protocol client stamping in `data_received`, the least any Python client on this host can show
(the server's and the kernel's share of the error), so probe minus floor is sloguard's own cost.

Run: .venv/bin/python benchmarks/probe_timing.py [--seconds 8]   (~1 min on 2 cores)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import multiprocessing as mp
import os
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import numpy as np
from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from sloguard.probes.chunk import Chunk
from sloguard.probes.events import Events
from sloguard.probes.sse import split
from sloguard.probes.stream import fetch, make_session
from sloguard.probes.timing import Tally

TOKENS = 16  # events per stream
ITL_S = 0.020  # server gap between events
FIRST_S = 0.030  # server wait before the first event
SERIES = 10_000
OWN = "probe, own process"
GOALS_MS = {"p50": 0.5, "p99": 1.0}  # at <= 16 streams on an idle host


def _event(i: int) -> bytes:
    body = {"choices": [{"index": 0, "delta": {"content": f" t{i}"}, "finish_reason": None}],
            "t": time.perf_counter_ns()}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


async def _stream(request: web.Request) -> web.StreamResponse:
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await asyncio.sleep(FIRST_S)
    for i in range(TOKENS):
        await resp.write(_event(i))  # the stamp is taken inside _event, immediately before the write
        await asyncio.sleep(ITL_S)
    await resp.write(b"data: [DONE]\n\n")
    return resp


def serve(port_out: Any) -> None:
    """Entry point of the SSE server process: send the bound port, then serve forever."""
    async def main() -> None:
        app = web.Application()
        app.add_routes([web.post("/v1/chat/completions", _stream)])
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_out.send(runner.addresses[0][1])
        await asyncio.Event().wait()
    asyncio.run(main())


async def _one_stream(session: Any, url: str, end: float, delay: float, ttft: list[float],
                      itl: list[float], late: list[int]) -> None:
    await asyncio.sleep(delay)
    while time.monotonic() < end:
        sent: list[int] = []
        events = Events(functools.partial(_decode, sent))
        events.tally = tally = Recording()
        f = await fetch(session, url, {"stream": True}, {}, 30.0, events.feed)
        late.append(f.late)
        recv = [t for t, c in tally.seen if c.content]
        for i, (r, t) in enumerate(zip(recv, sent, strict=True)):
            (ttft if i == 0 else itl).append((r - t) * 1e-6)


class Recording(Tally):
    """A Tally that also keeps every event's arrival stamp (the benchmark's receive side)."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, Chunk]] = []

    def add(self, t_ns: int, c: Chunk) -> None:
        self.seen.append((t_ns, c))
        super().add(t_ns, c)


def _decode(sent: list[int], data: str) -> Chunk:
    """Decode like a probe does (one json.loads per event) and keep the server's send stamp."""
    sent.append(json.loads(data)["t"])
    return Chunk(content=True)


class _RawClient(asyncio.Protocol):
    """Floor: a bare HTTP/1.0 client stamping inside data_received, before any library code runs."""

    def __init__(self, done: asyncio.Future[list[tuple[int, bytes]]]) -> None:
        self.done, self.chunks = done, list[tuple[int, bytes]]()

    def data_received(self, data: bytes) -> None:
        self.chunks.append((time.perf_counter_ns(), data))

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set_result(self.chunks)


async def _one_raw_stream(_: Any, url: str, end: float, delay: float, ttft: list[float],
                          itl: list[float], _late: list[int]) -> None:
    loop = asyncio.get_running_loop()
    port = int(url.split(":")[2].split("/")[0])
    await asyncio.sleep(delay)
    while time.monotonic() < end:
        done: asyncio.Future[list[tuple[int, bytes]]] = loop.create_future()
        transport, _ = await loop.create_connection(functools.partial(_RawClient, done), "127.0.0.1", port)
        transport.write(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}")
        events, _ = split(await done)  # header lines are not SSE fields: the splitter ignores them
        sent = [(e.t_ns, json.loads(e.data)["t"]) for e in events if e.data.startswith("{")]
        for i, (recv, send) in enumerate(sent):
            (ttft if i == 0 else itl).append((recv - send) * 1e-6)


async def probe_load(url: str, streams: int, seconds: float, raw: bool = False) -> dict[str, Any]:
    """Run `streams` back-to-back streaming loops (starts staggered over 1 s); return errors and CPU."""
    ttft: list[float] = []
    itl: list[float] = []
    late: list[int] = []
    cpu0, t0 = time.process_time(), time.monotonic()
    one = _one_raw_stream if raw else _one_stream
    async with make_session() as session:
        end = t0 + seconds
        await asyncio.gather(*(one(session, url, end, i / streams, ttft, itl, late) for i in range(streams)))
    wall = time.monotonic() - t0
    return {"ttft": ttft, "itl": itl, "late": sum(late),
            "cpu_per_stream": (time.process_time() - cpu0) / wall / streams}


def probe_process(url: str, streams: int, seconds: float, raw: bool, out: Any) -> None:
    """Entry point of the probe process; GC frozen like sloguard.probes.worker.main."""
    gc.freeze()
    out.send(asyncio.run(probe_load(url, streams, seconds, raw)))


def run_row(url: str, streams: int, seconds: float, where: str) -> dict[str, Any]:
    """Run one configuration in a spawned probe process, or in a thread of this process."""
    if where == "daemon thread":
        box: list[dict[str, Any]] = []
        t = threading.Thread(target=lambda: box.append(asyncio.run(probe_load(url, streams, seconds))))
        t.start()
        t.join()
        return box[0]
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=probe_process, args=(url, streams, seconds, where == "raw floor", send))
    proc.start()
    result: dict[str, Any] = recv.recv()
    proc.join()
    return result


@dataclass
class Daemon:
    """10k series served on /metrics and scraped every second while `scraping` is set."""

    registry: CollectorRegistry
    port: int
    scraping: threading.Event
    renders: list[float]


def start_daemon() -> Daemon:
    registry = CollectorRegistry()
    g = Gauge("bench_series", "Synthetic series.", ["a", "b"], registry=registry)
    for i in range(SERIES):
        g.labels(str(i % 100), str(i)).set(i)
    server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
    d = Daemon(registry, server.server_port, threading.Event(), [])
    threading.Thread(target=_scraper, args=(d,), daemon=True).start()
    return d


def _scraper(d: Daemon) -> None:
    while True:
        d.scraping.wait()
        start = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/metrics", timeout=10) as resp:
            resp.read()
        d.renders.append(time.perf_counter() - start)
        time.sleep(max(0.0, 1.0 - (time.perf_counter() - start)))


def _ms(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q):.3f}" if values else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0, help="measurement time per row")
    args = ap.parse_args()
    clock = time.get_clock_info("perf_counter").implementation
    if "CLOCK_MONOTONIC" not in clock:
        raise SystemExit(f"perf_counter is {clock}, not CLOCK_MONOTONIC: cross-process stamps not comparable")
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    server = ctx.Process(target=serve, args=(send,), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{recv.recv()}/v1/chat/completions"
    daemon = start_daemon()
    rows = ([(n, False, "raw floor") for n in (1, 16, 64)] + [(n, False, OWN) for n in (1, 16, 64)]
            + [(n, True, OWN) for n in (1, 16, 64)] + [(16, True, "daemon thread")])
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    print(f"probe timing error = client receive - server send (ms); {TOKENS} events/stream, ITL {ITL_S * 1e3:g} ms,"
          f" {args.seconds:g} s per row; scrape = {SERIES} series /metrics every 1 s")
    head = ("streams", "scrape", "client", "TTFT n", "TTFT p50", "TTFT p99", "ITL n", "ITL p50", "ITL p99",
            "CPU/stream", "late")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for streams, scraped, where in rows:
        (daemon.scraping.set if scraped else daemon.scraping.clear)()
        r = run_row(url, streams, args.seconds, where)
        cells = (str(streams), "yes" if scraped else "no", where,
                 str(len(r["ttft"])), _ms(r["ttft"], 50), _ms(r["ttft"], 99), str(len(r["itl"])),
                 _ms(r["itl"], 50), _ms(r["itl"], 99), f"{r['cpu_per_stream'] * 100:.2f}% core",
                 "-" if where == "raw floor" else str(r["late"]))
        print("| " + " | ".join(cells) + " |", flush=True)
    if daemon.renders:
        print(f"/metrics scrape of {SERIES} series: median {np.median(daemon.renders) * 1e3:.1f} ms "
              f"({len(daemon.renders)} scrapes)")
    print(f"goals: <= {GOALS_MS['p50']} ms median and <= {GOALS_MS['p99']} ms p99 at <= 16 streams idle; "
          "scraping adds <= 1 ms to p99")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end")
    server.terminate()


if __name__ == "__main__":
    main()
