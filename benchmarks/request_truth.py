"""Per-request stages against a server with known stage timings, and the OTLP receiver under load.

1. Stage error. The simulator (its own process) injects a network delay before it receives each request
   (`network_delay_s`), queues requests behind a small batch (`--max-batch 2`), and exports one vLLM-shaped
   span per request carrying its own queue/prefill/decode times and the delay it actually waited
   (`sim.network_delay_s`). This process runs sloguard's real probe (aiohttp, arrival-stamped reads) at 1
   and 16 concurrent requests, receives the spans on sloguard's OTLP receiver and joins them. Reported per
   request: measured network (client TTFT − server TTFT) minus the delay the server actually waited, and
   queue/prefill as sloguard reports them minus the server's own (the join must not change them: 0).
2. Receiver throughput on one core: protobuf decode + join of foreign vLLM-shaped spans (512 per request),
   in-process and through HTTP (client on the same loop, so a lower bound), spans/s.
3. Memory under a flood of foreign spans: RSS before and at its peak while 204,800 distinct foreign spans
   go through decode + join (orphan buffer at its default bound of 4096 spans).
4. Import cost: RSS and time of importing the daemon, and of the receiver + span exporter on top.

Run: .venv/bin/python benchmarks/request_truth.py [--requests 160]   (~1-2 min on 2 cores)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import random
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import aiohttp
import numpy as np
import psutil

from sloguard.model import ProbeResult
from sloguard.probes import PROBES, ProbeJob
from sloguard.probes.stream import make_session
from sloguard.probes.workload import pick_prompt
from sloguard.traces.join import Joiner
from sloguard.traces.otlp import Decoded, decode
from sloguard.traces.receiver import Receiver
from sloguard.traces.span import SpanData
from sloguard.web.webconfig import WebConfig

ROOT = Path(__file__).resolve().parents[1]
DELAY_S = 0.020


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


class Rig:
    def __init__(self) -> None:
        self.joiner = Joiner(hold=10.0)
        self.spans: dict[str, SpanData] = {}
        self.done: list[ProbeResult] = []

    def sink(self, d: Decoded) -> None:
        for s in d.spans:
            self.spans[s.trace_id] = s
        self.done += self.joiner.add(d.spans, time.time())


async def _probes(sim_url: str, concurrency: int, n: int) -> list[ProbeResult]:
    job = ProbeJob(name="truth", target="sim", api="chat", url=sim_url, model="sim-llama-3-8b", max_tokens=16,
                   timeout=30.0, prompts=((64, 2.0), (512, 1.0)))
    rng = random.Random(1)
    results: list[ProbeResult] = []
    async with make_session() as session:
        async def worker(k: int) -> None:
            for _ in range(k):
                results.append(await PROBES["chat"](session, job, pick_prompt(job, rng)))
        await asyncio.gather(*(worker(n // concurrency) for _ in range(concurrency)))
    return results


def run_probes(sim_url: str, concurrency: int, n: int) -> list[ProbeResult]:
    """The probe side in its own process, as in the daemon: receiving spans never delays an arrival stamp."""
    return asyncio.run(_probes(sim_url, concurrency, n))


async def stage_errors(sim_url: str, rig: Rig, concurrency: int, n: int) -> dict[str, list[float]]:
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        results = await asyncio.get_running_loop().run_in_executor(pool, run_probes, sim_url, concurrency, n)
    rig.done += rig.joiner.offer([(r, "otlp", "vllm") for r in results], time.time())
    deadline = time.monotonic() + 10
    while rig.joiner.pending and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    rig.done += rig.joiner.flush()
    err: dict[str, list[float]] = {"network": [], "queue": [], "prefill": [], "joined": [], "negative": []}
    for r in rig.done:
        span = rig.spans.get(r.trace_id)
        err["joined"].append(float(r.record == "otlp"))
        if span is None or r.network_s is None:
            continue
        a = span.attrs
        err["network"].append(r.network_s - float(a.get("sim.network_delay_s", DELAY_S)))
        err["queue"].append((r.queue_s or 0.0) - float(a["gen_ai.latency.time_in_queue"]))
        err["prefill"].append((r.prefill_s or 0.0) - float(a["gen_ai.latency.time_in_model_prefill"]))
    err["negative"] = [float(sum(rig.joiner.negative.values()))]
    rig.done = []
    return err


def row(name: str, values: list[float]) -> str:
    if not values:
        return f"  {name}: no data"
    v = np.array(values) * 1e3
    return (f"  {name:8s} n={len(v):4d}  error ms: p50 {np.percentile(v, 50):+.3f}  p99 {np.percentile(v, 99):+.3f}"
            f"  min {v.min():+.3f}  max {v.max():+.3f}")


async def part1(n: int) -> None:
    receiver_port = free_port()
    sim_port = free_port()
    sim = subprocess.Popen([sys.executable, "-m", "sloguard", "sim", "--listen", f"127.0.0.1:{sim_port}",
                            "--background-rps", "0", "--max-batch", "2", "--otlp-schedule-delay-ms", "100",
                            "--otlp-traces-endpoint", f"http://127.0.0.1:{receiver_port}/v1/traces"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rig = Rig()
    rec = Receiver(rig.sink, WebConfig(), 4 * 1024 * 1024)
    await rec.start(f"127.0.0.1:{receiver_port}")
    url = f"http://127.0.0.1:{sim_port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/v1/models", timeout=1).read()
                break
            except OSError:
                await asyncio.sleep(0.1)
        req = urllib.request.Request(f"{url}/sim/faults", data=json.dumps({"network_delay_s": DELAY_S}).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=5).read()
        print(f"1. per-request stage error vs the server's own times (network delay {DELAY_S * 1e3:.0f} ms injected)")
        for c in (1, 16):
            err = await stage_errors(url, rig, c, n)
            joined = statistics.mean(err["joined"]) if err["joined"] else 0.0
            print(f" concurrency {c}: joined {joined:.1%} of {len(err['joined'])} requests, "
                  f"negative stages dropped {int(err['negative'][0])}")
            for k in ("network", "queue", "prefill"):
                print(row(k, err[k]))
    finally:
        await rec.stop()
        sim.terminate()
        sim.wait(5)


def foreign_request(spans: int, seed: int = 2) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add().scope_spans.add()
    rng = random.Random(seed)
    for _ in range(spans):
        s = ss.spans.add(trace_id=rng.randbytes(16), span_id=rng.randbytes(8), name="llm_request", kind=2,
                         start_time_unix_nano=1, end_time_unix_nano=2)
        for key, value in (("gen_ai.latency.time_to_first_token", 0.04), ("gen_ai.latency.e2e", 0.4),
                           ("gen_ai.latency.time_in_queue", 0.0001), ("gen_ai.latency.time_in_model_prefill", 0.03),
                           ("gen_ai.latency.time_in_model_decode", 0.3), ("gen_ai.request.id", "chatcmpl-x")):
            kv = s.attributes.add(key=key)
            if isinstance(value, str):
                kv.value.string_value = value
            else:
                kv.value.double_value = value
    return bytes(req.SerializeToString())


async def part2_3() -> None:
    body = foreign_request(512)
    joiner = Joiner()
    start = time.perf_counter()
    rounds = 200
    for _ in range(rounds):
        d = decode(body)
        joiner.add(d.spans, time.time())
    dt = time.perf_counter() - start
    print(f"2. receiver throughput, one core: decode + join {rounds * 512 / dt:,.0f} spans/s in-process "
          f"({len(body) / 512:.0f} bytes/span)")
    rig = Rig()
    rec = Receiver(rig.sink, WebConfig(), 4 * 1024 * 1024)
    port = await rec.start("127.0.0.1:0")
    async with aiohttp.ClientSession() as s:
        start = time.perf_counter()
        for _ in range(rounds):
            async with s.post(f"http://127.0.0.1:{port}/v1/traces", data=body,
                              headers={"Content-Type": "application/x-protobuf"}) as resp:
                await resp.read()
        dt = time.perf_counter() - start
    await rec.stop()
    print(f"   through HTTP (client on the same loop): {rounds * 512 / dt:,.0f} spans/s")
    joiner = Joiner()
    bodies = [foreign_request(512, seed) for seed in range(10, 410)]  # 204,800 distinct foreign spans
    before, peak = rss_mib(), 0.0
    for b in bodies:
        joiner.add(decode(b).spans, time.time())
        joiner.due(time.time())
        peak = max(peak, rss_mib())
    print(f"3. flood of {len(bodies) * 512:,} foreign spans: RSS {before:.1f} MiB -> peak {peak:.1f} MiB, held "
          f"{joiner.orphans} spans (bound 4096), dropped: overflow {joiner.spans['overflow']:,}, "
          f"foreign {joiner.spans['foreign']:,}")


_IMPORTS = """
import time
def rss():
    return int([x for x in open('/proc/self/status') if x.startswith('VmRSS')][0].split()[1]) / 1024
t = time.perf_counter(); import sloguard.daemon; t1 = time.perf_counter(); r1 = rss()
import sloguard.traces.receiver, sloguard.traces.client_spans; t2 = time.perf_counter()
print(f"{(t1 - t) * 1e3:.0f} {r1:.1f} {(t2 - t1) * 1e3:.0f} {rss() - r1:.1f}")
"""


def part4() -> None:
    # VmRSS, not ru_maxrss: a child's ru_maxrss starts at its parent's peak (kept across fork + exec).
    runs = [[float(x) for x in subprocess.run([sys.executable, "-c", _IMPORTS], capture_output=True, text=True,
                                              cwd=ROOT, check=True).stdout.split()] for _ in range(5)]
    med = [statistics.median(r[i] for r in runs) for i in range(4)]
    print(f"4. import cost (median of 5 fresh interpreters): daemon {med[0]:.0f} ms, RSS {med[1]:.1f} MiB; "
          f"receiver + span exporter on top: +{med[2]:.0f} ms, +{med[3]:.1f} MiB (only when configured)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=160)
    args = ap.parse_args()
    asyncio.run(part1(args.requests))
    asyncio.run(part2_3())
    part4()


if __name__ == "__main__":
    main()
