"""Flooding targets beside healthy ones in the daemon's probe process: healthy failures, TTFT error added, CPU.

Servers (tests/support/hostile_streams.py, two processes): healthy targets answer `brisk` (16 events 10 ms apart
after 20 ms, ~180 ms); flooding targets answer `pings-N`: tiny SSE comments (`:`), each in its own HTTP chunk, N a
second (default 100,000, ~10 % of a core to parse; 5x: 500,000, about what one probe loop parses), the flood the
event cap does not count (a flood of tiny data events ends at the cap, 320 events for a default probe). The
probes run in the daemon's own probe process (sloguard.probes.worker.ProbeWorker: its scheduler, helper and all):
each healthy probe every 500 ms with a 400 ms timeout, each flood probe (default settings: 64 tokens) every 2 s
with a 1.5 s timeout.
Per row: healthy requests; healthy failures, and how many of them the server itself answered after the request's
deadline (its own record of its last write, GET /served, against the request's start + 400 ms, both wall clock);
healthy TTFT stamp error (the probe's arrival stamp of the first event - the server's send stamp, perf_counter_ns,
one clock for every process on Linux) p99, and what the floods added to it
against a run without them just before (same healthy count, same machine state); how the flood requests ended; the
probe processes' CPU; the probe loop's longest stall (its own report).

Part 1 (designs): 4 healthy + 4 floods at 5x: as shipped, and without each of its parts.
Part 2 (the grid): 1, 4, 16 healthy x 1, 4 floods x default, 5x rate x quiet, loaded machine ("loaded": one CPU
burner per core beside each row, tests/support/cpu_burner.py), as shipped.
Part 3 (`--minutes`): the real daemon probing a healthy and a flood target every 1 s: RSS, worst GETs, outcomes.

Run: .venv/bin/python benchmarks/hostile_streams.py [--seconds 10] [--part 1|2|3|all] [--minutes 2]   (~12 min)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.hostile_daemon import daemon_flood  # noqa: E402
from sloguard.outcome import outcome  # noqa: E402
from sloguard.probes.job import ProbeJob, default_max_events  # noqa: E402
from sloguard.probes.worker import ProbeWorker  # noqa: E402
from tests.support import hostile_streams  # noqa: E402
from tests.support.cpu_burner import burning  # noqa: E402
from tests.support.procs import http_get  # noqa: E402

RATE = 100_000  # flood pings a second at the default rate
TIMEOUT_S, INTERVAL_S = 0.4, 0.5  # healthy probes
FLOOD_TIMEOUT_S, FLOOD_INTERVAL_S = 1.5, 2.0
SHIPPED = {"budget": True, "arrival": True, "helper": True}
DESIGNS: dict[str, dict[str, bool]] = {  # budget: CPU budget; arrival: deadline judged on arrival; helper: quarantine
    "shipped: arrival deadline + CPU budget + helper process": SHIPPED,
    "arrival deadline + CPU budget, no helper": {**SHIPPED, "helper": False},
    "arrival deadline only": {"budget": False, "arrival": True, "helper": False},
    "main: timer deadline, slices + event cap": {"budget": False, "arrival": False, "helper": False},
    "main, floods in a process of their own": {"budget": False, "arrival": False, "helper": False, "apart": True},
}


def configure(design: dict[str, bool]) -> None:
    """Switch this probe process to `design` (the helper process, if any, runs as shipped)."""
    from sloguard.probes import deadline, quarantine, stream, worker
    if not design["budget"]:
        setattr(stream, "CpuBudget", lambda: None)  # noqa: B010 (Events and fetch without a budget)
    if not design["arrival"]:
        class TimerDeadline(deadline.Deadline):  # asyncio.timeout(): the timer's verdict, whatever arrived
            def _judge(self) -> bool:
                return False

            def missed(self, end_ns: int) -> bool:
                return False
        setattr(stream, "Deadline", TimerDeadline)  # noqa: B010
    if not design["helper"]:
        class Here(quarantine.Quarantine):  # every target stays in this process
            def observe(self, r: Any) -> bool:
                return False
        setattr(worker, "Quarantine", Here)  # noqa: B010


def bench_main(design: dict[str, bool], *args: Any) -> None:
    """Entry point of a benchmark probe process: the design's switches, then sloguard.probes.worker.main."""
    from sloguard.probes import worker
    configure(design)
    worker.main(*args)


class BenchWorker(ProbeWorker):
    """The daemon's ProbeWorker, its process started through `bench_main`."""

    def __init__(self, jobs: Sequence[ProbeJob], design: dict[str, bool]) -> None:
        super().__init__(jobs)
        self.design = design

    def start(self) -> None:
        self._proc = self._ctx.Process(
            target=bench_main, args=(self.design, self._jobs, self._cmd_child, self._results_child, os.getpid()),
            name="sloguard-probe", daemon=True)
        self._proc.start()

    def cpu_s(self) -> float:
        procs = [psutil.Process(self._proc.pid), *psutil.Process(self._proc.pid).children(recursive=True)]
        return sum(t.user + t.system for t in (p.cpu_times() for p in procs))


def jobs_for(cell: dict[str, Any]) -> tuple[list[ProbeJob], list[ProbeJob]]:
    healthy = [ProbeJob(name=f"h{i}", target=f"h{i}", api="chat", url=f"{cell['base']}/brisk", model="m",
                        max_tokens=16, timeout=TIMEOUT_S, interval=INTERVAL_S) for i in range(cell["healthy"])]
    floods = [ProbeJob(name=f"f{i}", target=f"f{i}", api="chat", url=f"{cell['flood_base']}/pings-{cell['rate']}",
                       model="m", timeout=FLOOD_TIMEOUT_S, interval=FLOOD_INTERVAL_S, max_events=default_max_events(64))
              for i in range(cell["floods"])]
    return healthy, floods


def run_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """Run one row's probes for `seconds` after the first healthy result; return what they measured."""
    healthy, floods = jobs_for(cell)
    design = cell["design"]
    workers = [BenchWorker(healthy, design), BenchWorker(floods, design)] if design.get("apart") and floods \
        else [BenchWorker(healthy + floods, design)]
    for w in workers:
        w.start()
    results, stall = [], 0.0
    try:
        while not any(r.target.startswith("h") for w in workers for r in w.drain()):
            time.sleep(0.1)
        cpu0, end = sum(w.cpu_s() for w in workers), time.monotonic() + cell["seconds"]
        while time.monotonic() < end:
            time.sleep(0.5)
            results += [r for w in workers for r in w.drain()]
            stall = max(stall, workers[0].stall_seconds)
        cpu = (sum(w.cpu_s() for w in workers) - cpu0) / cell["seconds"]
    finally:
        for w in workers:
            w.stop()
    return summarize(cell["base"], results, cpu, stall)


def summarize(base: str, results: list[Any], cpu: float, stall: float) -> dict[str, Any]:
    """Join the healthy results with the server's record of each answer (by trace id)."""
    served: dict[str, list[int]] = json.loads(http_get(f"{base}/served", timeout=30)[1])
    healthy = [r for r in results if r.target.startswith("h")]
    failed = [r for r in healthy if not r.ok]
    late = sum(served.get(r.trace_id, [0, 1 << 62])[1] > (r.ts + TIMEOUT_S) * 1e9 for r in failed)  # wall clock
    ttft = [(r.t0_ns + r.ttft_s * 1e9 - served[r.trace_id][0]) * 1e-6
            for r in healthy if r.ok and r.ttft_s is not None and r.trace_id in served]
    return {"healthy": len(healthy), "failed": len(failed), "late": late, "ttft": ttft, "cpu": cpu, "stall": stall,
            "errors": Counter(str(r.error).split(" after")[0] for r in failed),
            "floods": Counter(outcome(r) for r in results if r.target.startswith("f"))}


def _p99(values: list[float]) -> float | None:
    return float(np.percentile(values, 99)) if values else None


HEAD = ("healthy requests", "healthy failures (server late)", "failed as", "TTFT err p99 (ms)", "p99 added (ms)",
        "flood requests ended as", "probe CPU (of a core)", "loop stall max (ms)")


def row(label: tuple[str, ...], r: dict[str, Any], base_p99: float | None) -> str:
    p99 = _p99(r["ttft"])
    added = f"{p99 - base_p99:+.3f}" if p99 is not None and base_p99 is not None else "-"
    cells = (*label, str(r["healthy"]), f"{r['failed']} ({r['late']})",
             ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items())) or "-",
             f"{p99:.3f}" if p99 is not None else "-", added,
             ", ".join(f"{k} {v}" for k, v in sorted(r["floods"].items())) or "-",
             f"{r['cpu']:.0%}", f"{r['stall'] * 1e3:.1f}")
    return "| " + " | ".join(cells) + " |"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def table(bases: tuple[str, str], seconds: float, rows: Sequence[tuple[tuple[str, ...], dict[str, Any]]]) -> None:
    """Run each row after a no-flood run of the same healthy count and machine state; print the table rows."""
    base_p99: dict[tuple[int, bool], float | None] = {}
    for label, cell in rows:
        cell = {"base": bases[0], "flood_base": bases[1], "seconds": seconds, **cell}
        with burning(seconds=10 * seconds + 60) if cell.get("loaded") else nullcontext():
            key = (cell["healthy"], bool(cell.get("loaded")))
            if key not in base_p99:
                r = run_cell({**cell, "floods": 0, "design": SHIPPED})
                base_p99[key] = _p99(r["ttft"])
                print(row((*label[:-2], "0", "-"), r, None), flush=True)
            r = run_cell(cell)
        print(row(label, r, base_p99[key]), flush=True)


def designs(bases: tuple[str, str], seconds: float) -> None:
    print(f"\nPart 1: designs; 4 healthy probes + 4 floods at 5x ({5 * RATE} pings/s each), quiet machine, "
          f"{seconds:g} s per row; load average {load()}")
    print("| design | floods | rate | " + " | ".join(HEAD) + " |\n|" + "---|" * (len(HEAD) + 3))
    table(bases, seconds, [((name, "4", "5x"), {"healthy": 4, "floods": 4, "rate": 5 * RATE, "design": d})
                           for name, d in DESIGNS.items()])
    print(f"load average {load()} at the end")


def grid(bases: tuple[str, str], seconds: float) -> None:
    for loaded in (False, True):
        state = f"loaded ({os.cpu_count()} CPU burners)" if loaded else "quiet"
        print(f"\nPart 2: {state} machine, as shipped, {seconds:g} s per row; load average {load()} at the start")
        print("| healthy | floods | rate | " + " | ".join(HEAD) + " |\n|" + "---|" * (len(HEAD) + 3))
        table(bases, seconds, [((str(h), str(f), f"{m}x"),
                                {"healthy": h, "floods": f, "rate": m * RATE, "design": SHIPPED, "loaded": loaded})
                               for h in (1, 4, 16) for f in (1, 4) for m in (1, 5)])
        print(f"load average {load()} at the end")


@contextmanager
def servers() -> Iterator[tuple[str, str]]:
    """Start the healthy and the flood server, each in its own process; yield their base URLs."""
    with hostile_streams.running() as healthy, hostile_streams.running() as flood:
        yield healthy, flood


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="measurement time per row")
    ap.add_argument("--part", choices=("1", "2", "3", "all"), default="all")
    ap.add_argument("--minutes", type=float, default=2.0, help="Part 3 duration")
    ap.add_argument("--baseline", action="store_true", help="Part 3 without the flood target, for comparison")
    args = ap.parse_args()
    print(f"host: {os.cpu_count()} CPUs, load average {load()} at start")
    with servers() as bases:
        if args.part in ("1", "all"):
            designs(bases, args.seconds)
        if args.part in ("2", "all"):
            grid(bases, args.seconds)
        if args.part in ("3", "all"):
            daemon_flood(bases[1], args.minutes, flood=not args.baseline)
    print(f"load average {load()} at end")


if __name__ == "__main__":
    main()
