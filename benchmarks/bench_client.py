"""`sloguard bench` client capacity: timing error and client lag at 1-1024 streams, and the max rate per core.

A raw-asyncio SSE server (its own process; keep-alive, chunked bodies, as vLLM answers) stamps when a request
has fully arrived (the kernel's receive stamp of its last segment, SO_TIMESTAMPNS, so its own busy loop does
not make the truth late) and `perf_counter_ns()` just before writing each event, keyed by the request's W3C
trace id; on Linux `perf_counter_ns` is CLOCK_MONOTONIC, one clock for every process. The bench side is
sloguard's own path: a WorkerPool with one worker process (one event loop) running closed-loop stages through
the probes (`sloguard bench`'s code).
Joined by trace id, per request:
- TTFT error = the bench's TTFT − the server's (first event sent − request received): transit both ways
  plus every client-side delay;
- ITL error = the bench's per-request p50 gap − the server's p50 gap between sends;
- client lag = the bench's send lag (closed loop: previous request ended → next one sent).
Rows per stream count: the bench as shipped (kernel receive stamps, t0 at the request's write); the same
worker with `SLOGUARD_KERNEL_STAMPS=0` (arrivals stamped in `data_received`); and a "raw floor": a bare
asyncio.Protocol client stamping in `data_received` (the least a userspace-stamping Python client on this
host can show).

Event spacing grows with the stream count (ITL = max(20 ms, streams x 0.5 ms)), so from 64 streams up the
server sends about the same ~2,000 events/s and ~220 requests/s: rows differ in how many streams one loop
juggles, not in how much data arrives. The last table runs one worker open loop at rising constant rates
(short requests) and reports the highest rate whose send-lag p99 stays within 1 ms.

Run: .venv/bin/python benchmarks/bench_client.py [--seconds 10] [--streams 1,16,64,256,1024]   (~3 min)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import multiprocessing as mp
import os
import socket
import time
import urllib.request
from typing import Any

import numpy as np
import psutil

from sloguard.bench.order import StageOrder
from sloguard.bench.pool import WorkerPool
from sloguard.bench.record import RequestRecord
from sloguard.bench.workload import WorkloadSpec
from sloguard.probes import rxstamp
from sloguard.probes.job import ProbeJob
from sloguard.probes.sse import split

EVENTS = 8
TTFT_GOALS_MS = {64: 1.0, 256: 5.0}  # TTFT error p99 at up to this many streams
LAG_GOAL_S = 0.001
RATES = (50, 100, 200, 400, 800, 1200, 1600)


# ---- the server ---------------------------------------------------------------------------------------

class _Conn(asyncio.Protocol):
    """Requests on one connection, one at a time: HTTP/1.1 keep-alive with a chunked SSE body (as vLLM and
    the simulator answer, so the bench client reuses connections); HTTP/1.0 (the raw floor) closes after."""

    def __init__(self, srv: _Server) -> None:
        self.srv, self.buf, self.transport = srv, b"", None
        self.clock: Any = time.perf_counter_ns

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        # The truth "request received" is when its bytes reached this host, not when this busy loop got to them.
        self.clock = rxstamp.enable(transport) or time.perf_counter_ns

    def data_received(self, data: bytes) -> None:
        self.buf += data
        head, sep, body = self.buf.partition(b"\r\n\r\n")
        if not sep:
            return
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
        size = int(headers.get("content-length", "0"))
        if len(body) < size:
            return
        received = self.clock()
        self.buf = body[size:]
        _method, path, version = lines[0].split()
        if path.startswith("/control"):
            self._control(path)
            return
        tid = headers.get("traceparent", "00-" + headers.get("x-id", "none") + "-0-0").split("-")[1]
        task = asyncio.ensure_future(self._stream(tid, received, keep=version == "HTTP/1.1"))
        self.srv.tasks.add(task)
        task.add_done_callback(self.srv.tasks.discard)

    def _control(self, path: str) -> None:
        if "itl=" in path:
            self.srv.itl = float(path.split("itl=")[1])
            body = b"{}"
        else:
            body = json.dumps(self.srv.log).encode()
            self.srv.log = {}
        assert self.transport is not None
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        self.transport.close()

    async def _stream(self, tid: str, received: int, keep: bool) -> None:
        t = self.transport
        assert t is not None
        frame = (lambda b: b"%x\r\n%s\r\n" % (len(b), b)) if keep else (lambda b: b)
        t.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                + (b"Transfer-Encoding: chunked\r\n\r\n" if keep else b"Connection: close\r\n\r\n"))
        sends: list[int] = []
        self.srv.log[tid] = [received, sends]
        itl = self.srv.itl
        for i in range(EVENTS):
            await asyncio.sleep(itl)
            last = i == EVENTS - 1
            chunk = {"choices": [{"index": 0, "delta": {"content": f" t{i}"},
                                  "finish_reason": "length" if last else None}]}
            data = frame(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")
            sends.append(time.perf_counter_ns())
            t.write(data)
        usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": EVENTS}}
        t.write(frame(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"))
        if keep:
            t.write(b"0\r\n\r\n")
        else:
            t.close()


class _Server:
    def __init__(self) -> None:
        self.itl = 0.02
        self.log: dict[str, list[Any]] = {}
        self.tasks: set[asyncio.Task[None]] = set()


def serve(port_out: Any) -> None:
    """Entry point of the server process."""
    gc.freeze()

    async def main() -> None:
        srv = _Server()
        server = await asyncio.get_running_loop().create_server(lambda: _Conn(srv), "127.0.0.1", 0, backlog=4096)
        if rxstamp.SO_TIMESTAMPNS is not None:  # accepted sockets inherit it: a new connection's first request
            server.sockets[0].setsockopt(socket.SOL_SOCKET, rxstamp.SO_TIMESTAMPNS, 1)  # (queued before accept)
        port_out.send(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()
    asyncio.run(main())


def control(base: str, query: str) -> Any:
    with urllib.request.urlopen(urllib.request.Request(f"{base}/control?{query}", data=b"{}"), timeout=60) as r:
        return json.loads(r.read())


# ---- the raw floor ------------------------------------------------------------------------------------

class _Raw(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[list[tuple[int, bytes]]]) -> None:
        self.done, self.chunks = done, list[tuple[int, bytes]]()

    def data_received(self, data: bytes) -> None:
        self.chunks.append((time.perf_counter_ns(), data))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(self.chunks)


async def _raw_stream(port: int, end: float, k: int, out: list[tuple[str, int, list[int]]]) -> None:
    loop = asyncio.get_running_loop()
    n = 0
    while time.monotonic() < end:
        n += 1
        rid = f"raw{k}x{n}"
        done: asyncio.Future[list[tuple[int, bytes]]] = loop.create_future()
        transport, _ = await loop.create_connection(functools.partial(_Raw, done), "127.0.0.1", port)
        t0 = time.perf_counter_ns()
        transport.write(f"POST /v1/chat/completions HTTP/1.0\r\nx-id: {rid}\r\nContent-Length: 2\r\n\r\n{{}}".encode())
        events, _ = split(await done)
        arrivals = [e.t_ns for e in events if e.data.startswith('{"choices":[{')]
        out.append((rid, t0, arrivals))


def raw_process(port: int, streams: int, seconds: float, conn: Any) -> None:
    gc.freeze()

    async def main() -> list[tuple[str, int, list[int]]]:
        out: list[tuple[str, int, list[int]]] = []
        end = time.monotonic() + seconds
        await asyncio.gather(*(_raw_stream(port, end, k, out) for k in range(streams)))
        return out
    conn.send(asyncio.run(main()))


def run_raw(port: int, streams: int, seconds: float) -> list[tuple[str, int, list[int]]]:
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=raw_process, args=(port, streams, seconds, send))
    proc.start()
    out: list[tuple[str, int, list[int]]] = recv.recv()
    proc.join()
    return out


# ---- the bench side -----------------------------------------------------------------------------------

async def run_bench(pool: WorkerPool, order: StageOrder) -> tuple[list[RequestRecord], float, float]:
    """Run one stage on the pool's first worker; return its records, loop-lag p99 and CPU seconds per request."""
    records: list[RequestRecord] = []
    proc = psutil.Process(pool.pids()[0])
    cpu0 = sum(proc.cpu_times()[:2])
    client = await pool.run([order], records.extend)
    cpu = sum(proc.cpu_times()[:2]) - cpu0
    return records, max(lag.p99 for lag in client.lags), cpu / max(len(records), 1)


def _gaps_p50(stamps: list[int]) -> float:
    return float(np.median(np.diff(stamps))) * 1e-9


def bench_errors(records: list[RequestRecord], log: dict[str, Any]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"ttft": [], "itl": [], "lag": [], "unmatched": []}
    for r in records:
        srv = log.get(r.result.trace_id)
        if srv is None or not r.result.ok or r.result.ttft_s is None:
            out["unmatched"].append(1.0)
            continue
        received, sends = srv
        out["ttft"].append(r.result.ttft_s - (sends[0] - received) * 1e-9)
        if r.result.itl_p50_s is not None and len(sends) > 1:
            out["itl"].append(r.result.itl_p50_s - _gaps_p50(sends))
        out["lag"].append(r.send_lag_s)
    return out


def raw_errors(rows: list[tuple[str, int, list[int]]], log: dict[str, Any]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"ttft": [], "itl": [], "lag": [], "unmatched": []}
    for rid, t0, arrivals in rows:
        srv = log.get(rid)
        if srv is None or len(arrivals) != EVENTS:
            out["unmatched"].append(1.0)
            continue
        received, sends = srv
        out["ttft"].append((arrivals[0] - t0 - (sends[0] - received)) * 1e-9)
        out["itl"].append(_gaps_p50(arrivals) - _gaps_p50(sends))
    return out


def _ms(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q) * 1e3:.3f}" if values else "-"


def job(base: str) -> ProbeJob:
    return ProbeJob(name="bench", target="local", api="chat", url=base, model="m", max_tokens=EVENTS, timeout=120.0,
                    prompts=((16, 1.0),))


async def user_stamp_pool(base: str) -> WorkerPool:
    """Return a one-worker pool whose worker stamps arrivals in userspace (kernel stamps switched off)."""
    pool = WorkerPool(WorkloadSpec(job(base), seed=1))
    os.environ["SLOGUARD_KERNEL_STAMPS"] = "0"  # read by the spawned worker when it opens connections
    try:
        await pool.ensure(1)
    finally:
        del os.environ["SLOGUARD_KERNEL_STAMPS"]
    return pool


async def concurrency_rows(base: str, port: int, streams_list: list[int], seconds: float) -> None:
    pool = WorkerPool(WorkloadSpec(job(base), seed=1))
    await pool.ensure(1)
    user = await user_stamp_pool(base)
    head = ("streams", "client", "requests", "TTFT err p50", "TTFT err p99", "ITL err p50", "ITL err p99",
            "lag p50", "lag p99", "loop lag p99", "CPU/request (us)", "unmatched")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    try:
        for stage, streams in enumerate(streams_list):
            itl = max(0.020, streams * 0.0005)
            control(base, f"itl={itl}")
            start = time.perf_counter_ns() + 300_000_000
            order = StageOrder(stage, "concurrency", start, streams=streams, end_s=seconds)
            records, loop_lag, cpu = await run_bench(pool, order)
            b = bench_errors(records, control(base, "log"))
            order = StageOrder(stage, "concurrency", time.perf_counter_ns() + 300_000_000, streams=streams,
                               end_s=seconds)
            u_records, u_lag, u_cpu = await run_bench(user, order)
            u = bench_errors(u_records, control(base, "log"))
            raw = raw_errors(await asyncio.to_thread(run_raw, port, streams, seconds), control(base, "log"))
            rows = (("bench (1 worker)", b, f"{loop_lag * 1e3:.3f}", f"{cpu * 1e6:.0f}"),
                    ("bench, userspace stamps", u, f"{u_lag * 1e3:.3f}", f"{u_cpu * 1e6:.0f}"),
                    ("raw floor (userspace)", raw, "-", "-"))
            for name, e, extra, per in rows:
                cells = (str(streams), name, str(len(e["ttft"])), _ms(e["ttft"], 50), _ms(e["ttft"], 99),
                         _ms(e["itl"], 50), _ms(e["itl"], 99), _ms(e["lag"], 50), _ms(e["lag"], 99), extra,
                         per, str(len(e["unmatched"])))
                print("| " + " | ".join(cells) + " |", flush=True)
            goal = next((g for n, g in sorted(TTFT_GOALS_MS.items()) if streams <= n), None)
            if goal is not None and b["ttft"]:
                p99 = np.percentile(b["ttft"], 99) * 1e3
                print(f"|  | goal: TTFT err p99 <= {goal:g} ms: {'met' if p99 <= goal else 'MISSED'} "
                      f"({p99:.2f} ms) |" + " |" * (len(head) - 2))
    finally:
        pool.close()
        user.close()


async def rate_rows(base: str, seconds: float) -> None:
    control(base, "itl=0.02")
    pool = WorkerPool(WorkloadSpec(job(base), seed=2))
    await pool.ensure(1)
    head = ("rate (req/s)", "sent", "lag p50 (ms)", "lag p99 (ms)", "lag max (ms)", "loop lag p99 (ms)",
            "TTFT err p99 (ms)", "worker CPU/request (us)")
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    best = None
    try:
        for stage, rate in enumerate(RATES):
            n = int(rate * seconds)
            start = time.perf_counter_ns() + 300_000_000
            order = StageOrder(stage, "rate", start, arrivals=tuple((i, i / rate) for i in range(n)))
            records, loop_lag, cpu = await run_bench(pool, order)
            errs = bench_errors(records, control(base, "log"))
            lags = [r.send_lag_s for r in records]
            p99 = float(np.percentile(lags, 99))
            print(f"| {rate} | {len(records)} | {_ms(lags, 50)} | {_ms(lags, 99)} | {max(lags) * 1e3:.3f} | "
                  f"{loop_lag * 1e3:.3f} | {_ms(errs['ttft'], 99)} | {cpu * 1e6:.0f} |", flush=True)
            if p99 <= LAG_GOAL_S:
                best = rate
    finally:
        pool.close()
    print(f"highest constant rate one client core (one worker) sent with lag p99 <= 1 ms: "
          f"{best if best is not None else 'none of'} req/s (of {', '.join(map(str, RATES))})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="measurement time per row")
    ap.add_argument("--streams", default="1,16,64,256,1024")
    ap.add_argument("--rate-seconds", type=float, default=5.0)
    args = ap.parse_args()
    clock = time.get_clock_info("perf_counter").implementation
    if "CLOCK_MONOTONIC" not in clock:
        raise SystemExit(f"perf_counter is {clock}, not CLOCK_MONOTONIC: cross-process stamps not comparable")
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    server = ctx.Process(target=serve, args=(send,), daemon=True)
    server.start()
    port = recv.recv()
    base = f"http://127.0.0.1:{port}"
    print(f"host: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    print(f"errors in ms = bench (or raw client) - server truth; {EVENTS} events/request, ITL max(20 ms, streams x "
          f"0.5 ms), {args.seconds:g} s per row\n")
    asyncio.run(concurrency_rows(base, port, [int(s) for s in args.streams.split(",")], args.seconds))
    asyncio.run(rate_rows(base, args.rate_seconds))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end")
    server.terminate()


if __name__ == "__main__":
    main()
