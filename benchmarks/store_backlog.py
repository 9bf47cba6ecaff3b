"""Benchmark degraded mode: memory per backlogged probe result, the time to write a full backlog back, and the
time alert state and the outbox take to move to memory and back.

Scenario: a Persistence on a real file refuses writes (SQLITE_READONLY, as after a read-only remount) while
`--results` probe results arrive (realistic rows: unique trace ids, error strings on failures); memory is
measured under tracemalloc. Then writes work again and one recovery writes the whole backlog. Separately,
an outbox of `--notifications` queued items is copied to memory (failover) and back (attach).
Run: .venv/bin/python benchmarks/store_backlog.py [--results N] [--notifications N]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

from sloguard.alerts.engine import Alert
from sloguard.alerts.outbox import Outbox
from sloguard.alerts.routing import Notification
from sloguard.alerts.state import AlertState
from sloguard.clock import FakeClock
from sloguard.fallback import FallbackConnection
from sloguard.model import ProbeResult
from sloguard.persistence import Persistence
from sloguard.statedir import prepare


def _results(n: int, start: float, seed: int) -> list[ProbeResult]:
    rng = random.Random(seed)
    return [ProbeResult(ts=start + i * 0.37, probe="chat-mix", target="chat", model="meta-llama/Llama-3.1-8B-Instruct",
                        api="chat", ok=i % 3 != 0, error=None if i % 3 else f"http 500: upstream error {i}",
                        status_code=200 if i % 3 else 500, connect_s=rng.random() / 1e3, ttft_s=rng.random(),
                        ttfot_s=rng.random(), e2e_s=rng.random() * 3, tpot_s=rng.random() / 20,
                        itl_p50_s=rng.random() / 20, itl_p99_s=rng.random() / 10, itl_max_s=rng.random() / 5,
                        prompt_tokens=rng.randint(50, 500), output_tokens=64, prompt_bucket="short",
                        trace_id=f"{rng.getrandbits(128):032x}") for i in range(n)]



def backlog(n: int, tmp: Path) -> None:
    clock = FakeClock(1_800_000_000.0)
    persist = Persistence(prepare(str(tmp / "state")), clock, backlog=n)
    assert persist.store is not None
    persist.store.conn.execute("PRAGMA query_only = ON")
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for i in range(0, n, 8):  # 8 results per drain (8 probes at 1/s, 1 s drains); then only the backlog holds them
        persist.add_probe_results(_results(min(8, n - i), clock.now() + i, seed=i))
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert len(persist.backlog) == n and not persist.up
    persist.store.close()  # a new connection writes again (as after remounting read-write)
    persist.store = None
    clock.advance(5)
    t0 = time.perf_counter()
    persist.tick()
    took = time.perf_counter() - t0
    assert persist.up and not persist.backlog
    print(f"backlog: {n} results held in memory: {held / 2**20:.1f} MiB ({held / n:.0f} B/result)")
    print(f"recovery: reopen + write {n} backlogged results: {took * 1e3:.0f} ms ({took / n * 1e6:.1f} µs/result)")
    persist.close()


def outbox(n: int, tmp: Path) -> None:
    disk = sqlite3.connect(tmp / "alerts.db", check_same_thread=False)
    conn = FallbackConnection(disk)
    AlertState(conn)  # type: ignore[arg-type]
    box = Outbox(conn, threading.RLock())  # type: ignore[arg-type]
    alert = Alert("A", (("alertname", "A"), ("slo", "chat-latency")), (("summary", "x" * 200),), "firing", 0.0, 1.0,
                  fired_at=0.0)
    with conn:
        box.put([Notification("hook", f"g{i}", "firing", (), (alert,), float(i)) for i in range(n)], 0.0)
    t0 = time.perf_counter()
    conn.detach()
    moved = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.attach(disk)
    back = time.perf_counter() - t0
    print(f"alert tables with {n} queued notifications: to memory {moved * 1e3:.1f} ms, back to file "
          f"{back * 1e3:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=int, default=20_000, help="backlogged probe results (default: the bound)")
    ap.add_argument("--notifications", type=int, default=1_000, help="queued notifications in the outbox")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        backlog(args.results, Path(tmp))
        outbox(args.notifications, Path(tmp))


if __name__ == "__main__":
    main()
