"""Hostile streaming targets vs healthy probes: isolation options, hard timeouts, and the daemon under a flood.

Part 1 (probe process, `--seconds` per row): 4 healthy streams (tests/support/hostile_streams.py `healthy`:
16 events 20 ms apart carrying the server's send stamp) run in one probe process beside a `flood` stream
(tiny events as fast as the socket goes; one request every 2 s, timeout 1.5 s), one row per design:
- "no flood": the reference;
- "old design": no parse slices, 256 KiB socket reads, no event cap (what the issue measured);
- "slices, 256 KiB reads" / "slices, 16 KiB reads": sliced parsing that yields to the loop, no event cap;
- "shipped": slices, 16 KiB reads and the default max_events (4 x 64 + 64): the flood ends as event_flood;
- "flood in own process": the multi-process option (flood in a second probe process, old design there).
Figures: healthy TTFT / ITL stamp error (client arrival - server send) p50 / p99 / max; how each flood
request ended and by how much a timed-out one overran its deadline; the probe loop's own p99 wait and
longest stall as reported by sloguard.probes.lag.BusyMeter.

Part 2 (`--minutes`, 0 to skip): the real daemon probing `healthy` and `flood` every 1 s; daemon RSS every
5 s, worst `GET /metrics` and `GET /debug/probes?limit=500` (each polled every 1 s), healthy probe outcomes.

Run: .venv/bin/python benchmarks/hostile_streams.py [--seconds 10] [--minutes 10] [--part 1|2|both] [--baseline]
(`--baseline`: Part 2 without the flood target, the same daemon's worst GETs on this host without a flood)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.probe_timing import Recording  # noqa: E402
from tests.support.procs import free_port, http_get, start_daemon, wait_until  # noqa: E402

HEALTHY_STREAMS = 4
FLOOD_TIMEOUT_S = 1.5
FLOOD_INTERVAL_S = 2.0
ROWS: dict[str, dict[str, Any]] = {
    "no flood": {"flood": None},
    "old design": {"flood": "here", "slice": False, "read": 256 * 1024, "cap": 10**9},
    "slices, 256 KiB reads": {"flood": "here", "slice": True, "read": 256 * 1024, "cap": 10**9},
    "slices, 16 KiB reads": {"flood": "here", "slice": True, "read": 16 * 1024, "cap": 10**9},
    "shipped": {"flood": "here", "slice": True, "read": 16 * 1024, "cap": None},
    "flood in own process": {"flood": "other", "slice": False, "read": 256 * 1024, "cap": 10**9},
}


def _configure(slice_: bool, read: int) -> None:
    from sloguard.probes import arrival, events
    arrival.READ_SIZE = read
    events.SLICE_NS = events.SLICE_NS if slice_ else 1 << 62


def _decode(sent: list[int], data: str) -> Any:
    from sloguard.probes.openai import decode_chat
    obj = json.loads(data)
    if "t" in obj:
        sent.append(obj["t"])
    return decode_chat(data)


async def _healthy(session: Any, url: str, end: float, delay: float, out: dict[str, list[float]]) -> None:
    from sloguard.probes.events import Events
    from sloguard.probes.stream import fetch
    await asyncio.sleep(delay)
    while time.monotonic() < end:
        sent: list[int] = []
        events = Events(functools.partial(_decode, sent))
        events.tally = tally = Recording()
        f = await fetch(session, url, {"stream": True}, {}, 10.0, events.feed)
        if f.error is not None:
            out["errors"].append(1.0)
            continue
        recv = [t for t, c in tally.seen if c.content]
        for i, (r, t) in enumerate(zip(recv, sent, strict=True)):
            out["ttft" if i == 0 else "itl"].append((r - t) * 1e-6)


async def _flood(session: Any, base: str, end: float, cap: int | None, out: dict[str, Any]) -> None:
    from sloguard.probes import PROBES
    from sloguard.probes.job import ProbeJob, default_max_events
    from sloguard.probes.outcome import outcome
    from sloguard.probes.workload import Prompt
    job = ProbeJob(name="flood", target="f", api="chat", url=f"{base}/flood", model="m", timeout=FLOOD_TIMEOUT_S,
                   max_events=cap or default_max_events(64))
    due = time.monotonic()
    while time.monotonic() < end:  # as the daemon schedules it: every FLOOD_INTERVAL_S, never overlapping
        start = time.monotonic()
        r = await PROBES["chat"](session, job, Prompt("x", 8, "short"))
        out["outcomes"][outcome(r)] += 1
        if outcome(r) == "timeout":
            out["overrun"].append(time.monotonic() - start - FLOOD_TIMEOUT_S)
        due = max(due + FLOOD_INTERVAL_S, time.monotonic())
        await asyncio.sleep(due - time.monotonic())


async def _run(base: str, seconds: float, row: dict[str, Any], healthy: bool) -> dict[str, Any]:
    from sloguard.probes.lag import BusyMeter
    from sloguard.probes.stream import make_session
    meter = BusyMeter()
    meter.install(asyncio.get_running_loop())
    out: dict[str, Any] = {"ttft": [], "itl": [], "errors": [], "outcomes": Counter(), "overrun": []}
    end = time.monotonic() + seconds
    async with make_session() as session:
        tasks = [_healthy(session, f"{base}/healthy/v1/chat/completions", end, i / HEALTHY_STREAMS, out)
                 for i in range(HEALTHY_STREAMS if healthy else 0)]
        if row.get("flood") == "here" or not healthy:
            tasks.append(_flood(session, base, end, row.get("cap"), out))
        await asyncio.gather(*tasks)
    out["wait_p99"], out["stall_max"] = meter.report()
    return out


def probe_process(base: str, seconds: float, row: dict[str, Any], healthy: bool, conn: Any) -> None:
    """Entry point of a spawned probe process (GC frozen, as sloguard.probes.worker.main)."""
    gc.freeze()
    _configure(row.get("slice", True), row.get("read", 16 * 1024))
    conn.send(asyncio.run(_run(base, seconds, row, healthy)))


def run_row(base: str, seconds: float, row: dict[str, Any]) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    procs = []
    for healthy in (True, False) if row.get("flood") == "other" else (True,):
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=probe_process, args=(base, seconds, row, healthy, send))
        p.start()
        procs.append((p, recv))
    results = [recv.recv() for _, recv in procs]
    for p, _ in procs:
        p.join()
    if len(results) == 2:
        results[0]["outcomes"], results[0]["overrun"] = results[1]["outcomes"], results[1]["overrun"]
    return results[0]


def _q(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q):.3f}" if values else "-"


def isolation(base: str, seconds: float) -> None:
    print(f"\nPart 1: {HEALTHY_STREAMS} healthy streams + 1 flood stream in one probe process, {seconds:g} s per row; "
          "stamp error = client arrival - server send (ms)")
    head = ("design", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "ITL max", "healthy errors", "flood outcomes",
            "timeout overrun max (ms)", "loop p99 wait (ms)", "loop stall max (ms)")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for name, row in ROWS.items():
        r = run_row(base, seconds, row)
        itl = r["itl"]
        cells = (name, _q(r["ttft"], 50), _q(r["ttft"], 99), _q(itl, 50), _q(itl, 99),
                 f"{max(itl):.3f}" if itl else "-", str(len(r["errors"])),
                 ", ".join(f"{k} {v}" for k, v in sorted(r["outcomes"].items())) or "-",
                 f"{max(r['overrun']) * 1e3:.1f}" if r["overrun"] else "-",
                 f"{r['wait_p99'] * 1e3:.3f}", f"{r['stall_max'] * 1e3:.1f}")
        print("| " + " | ".join(cells) + " |", flush=True)


def _config(port: int, base: str, state: Path, flood: bool = True) -> str:
    flood_probe = "  - {name: flood, target: flood, interval: 1s, timeout: 900ms, max_tokens: 64}\n" if flood else ""
    return f"""version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
targets:
  - {{name: healthy, engine: openai, api_url: "{base}/healthy", model: m}}
  - {{name: flood, engine: openai, api_url: "{base}/flood", model: m}}
probes:
  - {{name: healthy, target: healthy, interval: 1s, timeout: 900ms, max_tokens: 16}}
{flood_probe}"""


def _get_ms(url: str) -> float:
    start = time.perf_counter()
    status, _ = http_get(url, timeout=60)
    assert status == 200, (url, status)
    return (time.perf_counter() - start) * 1e3


def daemon_flood(base: str, minutes: float, flood: bool = True) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        proc = start_daemon(Path(tmp), _config(port, base, Path(tmp) / "state", flood))
        first = b'outcome="event_flood"' if flood else b'outcome="success"'
        try:
            ps = psutil.Process(proc.popen.pid)
            wait_until(lambda: first in http_get(f"{proc.url}/metrics")[1], 60, "a first result")
            rss0 = ps.memory_info().rss
            rss, metrics_ms, debug_ms = [rss0], [], []
            end = time.monotonic() + minutes * 60
            while time.monotonic() < end:
                metrics_ms.append(_get_ms(f"{proc.url}/metrics"))
                debug_ms.append(_get_ms(f"{proc.url}/debug/probes?limit=500"))
                if len(metrics_ms) % 5 == 0:
                    rss.append(ps.memory_info().rss)
                time.sleep(max(0.0, 1.0 - (metrics_ms[-1] + debug_ms[-1]) / 1e3))
            text = http_get(f"{proc.url}/metrics")[1].decode()
        finally:
            proc.stop()
    counts = [line for line in text.splitlines() if line.startswith("sloguard_probe_requests_total")]
    mib = 1 / (1 << 20)
    print(f"\nPart 2: daemon probing healthy{' + flood' if flood else ' only (baseline)'} every 1 s "
          f"for {minutes:g} min")
    print(f"RSS after the first result {rss0 * mib:.1f} MiB, peak {max(rss) * mib:.1f} MiB, "
          f"end {rss[-1] * mib:.1f} MiB: growth {(rss[-1] - rss0) * mib:+.1f} MiB "
          f"(peak {(max(rss) - rss0) * mib:+.1f})")
    print(f"GET /metrics: median {np.median(metrics_ms):.1f} ms, worst {max(metrics_ms):.1f} ms "
          f"({len(metrics_ms)} GETs); GET /debug/probes?limit=500: median {np.median(debug_ms):.1f} ms, "
          f"worst {max(debug_ms):.1f} ms")
    print("\n".join(counts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="Part 1 measurement time per row")
    ap.add_argument("--minutes", type=float, default=10.0, help="Part 2 duration (0: skip)")
    ap.add_argument("--part", choices=("1", "2", "both"), default="both")
    ap.add_argument("--baseline", action="store_true", help="Part 2 without the flood target, for comparison")
    args = ap.parse_args()
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "hostile_streams.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    base = f"http://127.0.0.1:{int(server.stdout.readline())}"
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    try:
        if args.part in ("1", "both"):
            isolation(base, args.seconds)
        if args.part in ("2", "both") and args.minutes > 0:
            daemon_flood(base, args.minutes, flood=not args.baseline)
    finally:
        server.terminate()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end")


if __name__ == "__main__":
    main()
