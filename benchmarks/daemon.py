"""Daemon figures with the demo config: start → /-/ready, RSS after N seconds, /metrics render time.

Run: .venv/bin/python benchmarks/daemon.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.procs import free_port, http_get, metric_value, simulator, start_daemon, wait_until

from sloguard.demo import demo_config


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sloguard-bench-"))
    with simulator(tmp) as sim:
        port = free_port()
        t0 = time.monotonic()
        d = start_daemon(tmp, demo_config(sim.port, f"127.0.0.1:{port}", str(tmp / "state")))
        ready = t0 + wait_until(lambda: http_get(f"{d.url}/-/ready")[0] == 200, 60, "ready", step=0.02)
        start_to_ready = ready - t0
        time.sleep(max(0.0, args.seconds - (time.monotonic() - t0)))
        proc = psutil.Process(d.popen.pid)
        rss = proc.memory_info().rss
        renders, sizes = [], []
        for _ in range(20):
            t = time.perf_counter()
            _, body = http_get(f"{d.url}/metrics")
            renders.append(time.perf_counter() - t)
            sizes.append(len(body))
            time.sleep(0.05)
        time.sleep(6.0)  # one evaluation publishes the render time of the renders above
        text = http_get(f"{d.url}/metrics")[1].decode()
        series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
        render = metric_value(text, "sloguard_exposition_render_seconds")
        render = float("nan") if render is None else render
        d.stop()
    print(f"start → /-/ready (process spawn included): {start_to_ready * 1000:.0f} ms")
    print(f"daemon RSS after {args.seconds:.0f} s:            {rss / 2**20:.1f} MiB")
    print(f"series in /metrics:                     {series}")
    print(f"/metrics render (uncached, in-daemon):  {render * 1000:.2f} ms")
    print(f"/metrics GET (cached, client-side):     median {statistics.median(renders) * 1000:.2f} ms, "
          f"max {max(renders) * 1000:.2f} ms, {statistics.median(sizes) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
