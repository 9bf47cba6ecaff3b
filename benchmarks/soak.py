"""Soak: the demo config for N minutes; RSS of the daemon sampled every 30 s, growth reported.

Run: .venv/bin/python benchmarks/soak.py --minutes 60
Growth includes the SLO windows filling (they hold up to the SLO window of probe results), so it is
an upper bound on leaks; the per-sample table shows whether growth flattens.
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=30.0, help="seconds between RSS samples")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sloguard-soak-"))
    rows: list[tuple[float, float, float, float]] = []
    with simulator(tmp) as sim:
        d = start_daemon(tmp, demo_config(sim.port, f"127.0.0.1:{free_port()}", str(tmp / "state")))
        wait_until(lambda: http_get(f"{d.url}/-/ready")[0] == 200, 60, "ready")
        proc, t0 = psutil.Process(d.popen.pid), time.monotonic()
        while (elapsed := time.monotonic() - t0) < args.minutes * 60:
            text = http_get(f"{d.url}/metrics")[1].decode()
            requests = metric_value(text, "sloguard_probe_requests_total") or 0.0
            rows.append((elapsed, proc.memory_info().rss / 2**20, proc.cpu_times().user + proc.cpu_times().system,
                         requests))
            print(f"{elapsed / 60:6.1f} min  RSS {rows[-1][1]:6.1f} MiB  CPU {rows[-1][2]:7.1f} s  "
                  f"probe requests {requests:.0f}", flush=True)
            time.sleep(args.every)
        d.stop()
    first = next(r for r in rows if r[0] >= 60.0) if rows[-1][0] >= 60 else rows[0]
    last = rows[-1]
    cpu = (last[2] - first[2]) / max(1.0, last[0] - first[0])
    print(f"\nRSS at 1 min {first[1]:.1f} MiB, at {last[0] / 60:.0f} min {last[1]:.1f} MiB: "
          f"growth {100 * (last[1] / first[1] - 1):+.1f}%; daemon CPU {100 * cpu:.1f}% of a core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
