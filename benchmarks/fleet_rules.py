"""What a 30 d SLO window costs Prometheus: raw series vs the recorded 5 min counts the generated rules sum.

Backfills (promtool tsdb create-blocks-from openmetrics) 30 days of one server SLO budget's counters,
`sloguard_slo_requests_total{good,replica}` of `--replicas` replicas scraped every `--scrape`, and the 5 min
counts the generated rules record from them (`sloguard:slo_requests_by_good:increase5m`, one sample per 5 min as
a rule interval dividing 5 min writes them), into a real Prometheus; then times, with Prometheus's own query
statistics (`stats=all`), the 30 d count three ways, each evaluated `--runs` times at the end of the data:
- `increase(...[30d])` summed: what a rule without tiles reads (Pyrra's default),
- sloguard's exact difference over 30 d (`X - (X offset 30d or min_over_time(X[30d]))`, resets, increase), summed,
- the generated tiled record: `sum_over_time(sloguard:slo_requests_by_good:increase5m[29d23h59m59s999ms:5m])`,
and checks that the three agree with the counts the data were built from.
Prints samples read and median/max evaluation time per form; the load average is printed with them.

Run: .venv/bin/python benchmarks/fleet_rules.py [--replicas 8] [--scrape 30s] [--runs 7]
(the backfill dominates: 10 min for 4 replicas on a 2-core host at load average 25)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sloguard.config.units import parse_duration
from sloguard.rulegen.recording import count_expr, tile_range

DAY, TILE = 86400, 300
LABELS = 'slo="chat-server",sli="latency",metric="ttft",percentile="95"'


def per_scrape(replica: int, k: int) -> tuple[int, int]:
    """Return the (good, bad) requests replica `replica` served in scrape interval `k` (deterministic)."""
    return 5 + (k + replica) % 7, 1 if (k * 7 + replica) % 23 == 0 else 0


def backfill(path: Path, replicas: int, scrape: int, end: int) -> tuple[int, int]:
    """Write the OpenMetrics file; return the (good, bad) totals over the 30 days (every scrape's increment)."""
    start, steps = end - 30 * DAY, 30 * DAY // scrape
    totals = [0, 0]
    with path.open("w") as out:
        out.write("# TYPE sloguard_slo_requests counter\n")
        for r in range(replicas):
            for good, idx in (("true", 0), ("false", 1)):
                cum = 0
                for k in range(steps + 1):
                    cum += per_scrape(r, k)[idx] if k else 0
                    out.write(f'sloguard_slo_requests_total{{{LABELS},good="{good}",replica="r{r}"}} {cum} '
                              f"{start + k * scrape}\n")
                totals[idx] += cum
        out.write("# TYPE sloguard:slo_requests_by_good:increase5m gauge\n")
        for good, idx in (("true", 0), ("false", 1)):
            for t in range(start + TILE, end + 1, TILE):  # each 5 min count: the scrapes in (t - 5m, t]
                ks = range((t - TILE - start) // scrape + 1, (t - start) // scrape + 1)
                value = sum(per_scrape(r, k)[idx] for r in range(replicas) for k in ks)
                out.write(f'sloguard:slo_requests_by_good:increase5m{{{LABELS},good="{good}"}} {value} {t}\n')
        out.write("# EOF\n")
    return totals[0], totals[1]


def query(url: str, expr: str, at: int) -> tuple[dict[str, float], float, float]:
    """Return (good -> value, samples read, evaluation seconds) of an instant query with Prometheus's statistics."""
    qs = urllib.parse.urlencode({"query": expr, "time": str(at), "stats": "all"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{qs}", timeout=300) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
    data = doc["data"]
    values = {s["metric"].get("good", ""): float(s["value"][1]) for s in data["result"]}
    stats = data["stats"]
    return values, float(stats["samples"]["totalQueryableSamples"]), float(stats["timings"]["evalTotalTime"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--scrape", default="30s")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    scrape = int(parse_duration(args.scrape))
    end = (int(time.time()) // TILE) * TILE - TILE  # 5 min aligned, in the past: what the backfill may write
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        t0 = time.monotonic()
        good, bad = backfill(base / "data.om", args.replicas, scrape, end)
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q", str(base / "data.om"),
                        str(base / "tsdb")], check=True)
        print(f"backfilled {args.replicas} replicas x 2 series x 30 d at {args.scrape} "
              f"({2 * args.replicas * (30 * DAY // scrape + 1):,} samples) in {time.monotonic() - t0:.0f} s")
        port = 19090 + os.getpid() % 1000
        (base / "prom.yml").write_text("global: {evaluation_interval: 1h}\n")
        prom = subprocess.Popen([shutil.which("prometheus") or "prometheus", f"--config.file={base / 'prom.yml'}",
                                 f"--storage.tsdb.path={base / 'tsdb'}", "--storage.tsdb.retention.time=90d",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(300):
                try:
                    with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    time.sleep(0.2)
            forms = {
                "increase() over 30d (raw)": 'sum by (good) (increase(sloguard_slo_requests_total[30d]))',
                "exact difference over 30d (raw)": count_expr(30 * DAY).replace("slo, sli, metric, percentile, ", ""),
                "sum of recorded 5m counts (tiled)": "sum by (good) (sum_over_time("
                f"sloguard:slo_requests_by_good:increase5m[{tile_range(30 * DAY)}:5m]))",
            }
            print(f"truth over the 30 d: good {good:,}, bad {bad:,}; load average {os.getloadavg()[0]:.1f}")
            for name, expr in forms.items():
                runs = [query(url, expr, end) for _ in range(args.runs)]
                values, samples, _ = runs[-1]
                times = [r[2] * 1000 for r in runs[1:]]  # the first run warms the caches
                print(f"{name:36} samples read {samples:>12,.0f}  eval median {statistics.median(times):8.1f} ms  "
                      f"max {max(times):8.1f} ms  good {values.get('true', 0):,.0f} bad {values.get('false', 0):,.0f}")
        finally:
            prom.terminate()
            prom.wait(30)


if __name__ == "__main__":
    main()
