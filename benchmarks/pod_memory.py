"""Memory of a sloguard pod: the daemon, its probe process and its /metrics parser process, summed.

Run: .venv/bin/python benchmarks/pod_memory.py [--seconds 60]

`typical`: the demo config against the simulator (probes every 2 s, scrapes every 5 s, two SLOs, store),
steady state: what the chart requests. `worst`: the same plus every hostile page of tests/support/hostile.py
scraped every second (a 300k-series cardinality bomb, a 200k-line page, a gzip bomb, ...), which keeps the
parser process at the peak sloguard's default scrape limits allow: what the limit must hold. RSS counts every
process's shared libraries again, PSS splits shared pages between the processes (closer to what the memory
cgroup charges); both are summed over the processes and sampled every 50 ms, and "RSS high-water" sums each
process's own peak (VmHWM: exact, even for spikes between samples; an upper bound for the sum's peak).
`sloguard check` is measured once (the config-check Job and `helm test` pod).
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's sloguard, as the daemon it starts
from hostile import Pages  # benchmarks/hostile.py: this script's directory is on sys.path
from support.hostile import PAGES
from support.procs import free_port, http_get, simulator, start_daemon, wait_until

from sloguard.demo import demo_config

ROOT = Path(__file__).resolve().parents[1]
MiB = 2**20


class Sampler:
    """Peak RSS and PSS of a process and all its descendants, summed, sampled from a thread."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.peak_rss = self.peak_pss = 0
        self.last_rss = self.last_pss = 0
        self.peak_procs = 0
        self.hwm: dict[int, int] = {}  # pid -> VmHWM bytes, last read
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = pss = 0
            procs = [self.proc, *self.proc.children(recursive=True)]
            for p in procs:
                with contextlib.suppress(psutil.Error, OSError, ValueError):
                    info = p.memory_full_info()
                    rss, pss = rss + info.rss, pss + info.pss
                    status = Path(f"/proc/{p.pid}/status").read_text()
                    self.hwm[p.pid] = int(status.split("VmHWM:")[1].split()[0]) * 1024
            self.last_rss, self.last_pss = rss, pss
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            self.peak_procs = max(self.peak_procs, len(procs))
            time.sleep(0.05)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def hostile_targets(url: str) -> str:
    """Extra `targets:` rows: every hostile page, scraped every second with default limits."""
    return "".join(f"  - {{name: {name}, engine: auto, metrics_url: '{url}/{name}', scrape_interval: 1s, "
                   f"scrape_timeout: 900ms}}\n" for name in PAGES)


def measure(tmp: Path, name: str, sim_port: int, extra_targets: str, seconds: float) -> str:
    port = free_port()
    config = demo_config(sim_port, f"127.0.0.1:{port}", str(tmp / f"state-{name}"))
    config = config.replace("\ntargets:\n", "\ntargets:\n" + extra_targets, 1)
    daemon = start_daemon(tmp, config, name=f"{name}.yaml")
    try:
        with Sampler(daemon.popen.pid) as sampler:
            wait_until(lambda: http_get(f"{daemon.url}/-/ready")[0] == 200, 60, "ready")
            end = time.monotonic() + seconds
            while time.monotonic() < end:  # a scraper's load on the exporter
                http_get(f"{daemon.url}/metrics", timeout=30)
                time.sleep(1.0)
    finally:
        daemon.stop()
    return (f"| {name} | {sampler.peak_procs} | {sampler.last_rss / MiB:.0f} | {sampler.peak_rss / MiB:.0f} | "
            f"{sum(sampler.hwm.values()) / MiB:.0f} | {sampler.last_pss / MiB:.0f} | {sampler.peak_pss / MiB:.0f} |")


def check_peak() -> float:
    """Peak RSS in MiB of `sloguard check -c sloguard.example.yaml` (one process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run([sys.executable, "-m", "sloguard", "check", "-c", str(ROOT / "sloguard.example.yaml")],
                   cwd=ROOT, capture_output=True, check=True)
    return max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="how long each scenario runs after /-/ready")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="sloguard-pod-memory-"))
    print(f"sloguard check peak RSS: {check_peak():.0f} MiB")
    print("| scenario | processes | RSS end MiB | RSS peak MiB | RSS high-water MiB | PSS end MiB | PSS peak MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with simulator(tmp) as sim:
        print(measure(tmp, "typical", sim.port, "", args.seconds), flush=True)
        with Pages() as pages:
            print(measure(tmp, "worst", sim.port, hostile_targets(pages.url("").rstrip("/")), args.seconds),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
