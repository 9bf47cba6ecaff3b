"""Worst /metrics GET and daemon RSS while hostile targets are scraped every second, one scenario at a time.

Run: .venv/bin/python benchmarks/hostile.py [--seconds 20] [--scenario NAME ...]

Each scenario starts a fresh daemon (a real process) scraping one healthy vLLM page plus the scenario's
targets (tests/support/hostile.py) every 1 s, then GETs /metrics every 50 ms for --seconds and prints
p50 / p99 / worst GET latency, the daemon's peak and final RSS, the peak RSS of its child processes (the probe
process, ~48 MiB, and the parser process once the first large page spawned it), and how the targets were judged.
Scenarios: `baseline` (healthy only), every page of hostile.PAGES with default limits, `big_page_allowed`
(the 200k-line page with sample_limit: 0, i.e. a legitimately huge page that is fully parsed each second),
and `all` (every hostile page at once).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.hostile import PAGES, daemon_config
from support.procs import free_port, http_get, metric_value, start_daemon, wait_until

HOSTILE = Path(__file__).resolve().parents[1] / "tests" / "support" / "hostile.py"


class Pages:
    """The hostile pages served by their own process, so serving them costs this (measuring) process nothing."""

    def __enter__(self) -> Pages:
        self.proc = subprocess.Popen([sys.executable, str(HOSTILE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        return self

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def __exit__(self, *_: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


def scenarios() -> dict[str, dict[str, str]]:
    """Scenario name -> {target name: page name[|extra target keys]}."""
    out: dict[str, dict[str, str]] = {"baseline": {}}
    out.update({name: {name: name} for name in PAGES})
    out["big_page_allowed"] = {"big": "big_page|, sample_limit: 0"}
    out["all"] = {name: name for name in PAGES}
    return out


def run(server: Pages, tmp: Path, name: str, targets: dict[str, str], seconds: float) -> str:
    port = free_port()
    config = daemon_config(server.url, port, str(tmp / f"state-{name}"), targets)
    daemon = start_daemon(tmp, config, name=f"{name}.yaml")
    proc = psutil.Process(daemon.popen.pid)
    peak, child_peak, stop = [0], [0], threading.Event()

    def sample_rss() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            children = 0
            for child in proc.children(recursive=True):  # the parser process, once spawned
                with contextlib.suppress(psutil.Error):
                    children += child.memory_info().rss
            child_peak[0] = max(child_peak[0], children)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    try:
        wait_until(lambda: http_get(f"{daemon.url}/-/ready")[0] == 200, 30, "ready")
        time.sleep(2.0)  # every target scraped at least once
        gets: list[float] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            status, _ = http_get(f"{daemon.url}/metrics", timeout=30)
            gets.append(time.perf_counter() - t)
            assert status == 200
            time.sleep(0.05)
        text = http_get(f"{daemon.url}/metrics", timeout=30)[1].decode()
        rss = proc.memory_info().rss
    finally:
        stop.set()
        sampler.join()
        daemon.stop()
    verdicts = []
    for target in targets:
        up = metric_value(text, "sloguard_source_up", {"source": "scrape", "target": target})
        reasons = sorted({line.split('reason="')[1].split('"')[0] for line in text.splitlines()
                          if line.startswith("sloguard_source_failures_total") and f'target="{target}"' in line})
        verdicts.append(f"{target}: up={up:g} {','.join(reasons)}" if up is not None else f"{target}: ?")
    q = statistics.quantiles(gets, n=100)
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return (f"| {name} | {len(gets)} | {statistics.median(gets) * 1e3:.1f} | {q[98] * 1e3:.1f} | "
            f"{max(gets) * 1e3:.1f} | {peak[0] / 2**20:.0f} | {rss / 2**20:.0f} | {child_peak[0] / 2**20:.0f} | "
            f"{series} | "
            f"{'; '.join(verdicts) or '-'} |")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="GET /metrics for this long per scenario")
    ap.add_argument("--scenario", action="append", choices=sorted(scenarios()), help="default: all of them")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="sloguard-hostile-"))
    chosen = args.scenario or list(scenarios())
    print("building hostile pages ...", file=sys.stderr)
    with Pages() as server:
        print("| scenario | GETs | GET p50 ms | GET p99 ms | GET worst ms | RSS peak MiB | RSS end MiB "
              "| child processes RSS peak MiB (probe + parser) | series | hostile targets |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for name in chosen:
            print(run(server, tmp, name, scenarios()[name], args.seconds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
