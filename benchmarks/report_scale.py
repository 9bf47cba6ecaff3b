"""Time and peak memory of `sloguard report` over two bench results files of N requests each (default 1,000,000).

The files are made once (kept in --dir): a real simulated closed-loop run (`sloguard.sim.benchfile`, 2,000
requests at concurrency 8) whose request records are repeated with every latency jittered ±10 % (seeded) up to
N per side, one stage, the candidate 10 % slower. `sloguard report` then runs as a process of its own, as a
user runs it (`--format json -o`); printed: wall seconds, peak RSS (the child's ru_maxrss), file sizes, and the
verdict. Goal (issue 47): ≤ 60 s and ≤ 1 GiB at 1,000,000 requests per side on the 2-core dev machine.

    .venv/bin/python benchmarks/report_scale.py                          # 1M per side (~1 min to make the files)
    .venv/bin/python benchmarks/report_scale.py --requests 200000 --replicates 1000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sloguard.sim.benchfile import closed_run

ROOT = Path(__file__).resolve().parents[1]
JITTERED = ("ttft_s", "ttft_sched_s", "e2e_s", "e2e_sched_s", "tpot_s", "itl_p50_s", "itl_p99_s", "queue_s",
            "prefill_s", "network_s", "elapsed_s")


def make(path: Path, n: int, seed: int, scale: float) -> None:
    """Write a results file of `n` requests (see the module docstring)."""
    records = closed_run(seed, [8], 2000, time_scale=scale, labels={"release": f"x{scale:g}"}, workload_seed=1)
    head, pool = records[0], [r for r in records if r["type"] == "request"]
    stage, end = next(r for r in records if r["type"] == "stage"), records[-1]
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(head, separators=(",", ":")) + "\n")
        for i in range(n):
            rec = dict(pool[i % len(pool)])
            k = rng.uniform(0.9, 1.1)
            for key in JITTERED:
                if isinstance(rec.get(key), float):
                    rec[key] *= k
            rec["seq"], rec["ts"] = i, 1.8e9 + i * 0.01
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
        fh.write(json.dumps({**stage, "requests": n, "ok": n}, separators=(",", ":")) + "\n")
        fh.write(json.dumps(end, separators=(",", ":")) + "\n")


def run(base: Path, cand: Path, out: Path, replicates: int) -> dict[str, Any]:
    """Run `sloguard report` on the two files; return wall seconds, peak RSS (MiB) and the verdict."""
    cmd = [sys.executable, "-m", "sloguard", "report", "--baseline", str(base), "--candidate", str(cand),
           "--format", "json", "-o", str(out), "--replicates", str(replicates)]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    verdict = json.loads(out.read_text())["verdict"] if done.returncode in (0, 1) and out.exists() else None
    return {"exit": done.returncode, "wall_s": round(wall, 1), "peak_rss_mib": round(peak), "verdict": verdict,
            "stderr": done.stderr.strip()[-300:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000, help="requests per side")
    ap.add_argument("--replicates", type=int, default=1000, help="bootstrap replicates (the report's default)")
    ap.add_argument("--dir", default="/tmp/sloguard-report-scale", help="where the files are made and kept")
    args = ap.parse_args()
    where = Path(args.dir)
    where.mkdir(parents=True, exist_ok=True)
    files = []
    for role, seed, scale in (("baseline", 11, 1.0), ("candidate", 12, 1.1)):
        path = where / f"{role}-{args.requests}.jsonl"
        if not path.exists():
            t = time.perf_counter()
            make(path, args.requests, seed, scale)
            print(f"made {path} ({path.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.0f} s")
        files.append(path)
    got = run(files[0], files[1], where / "report.json", args.replicates)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(json.dumps({"requests_per_side": args.requests, "replicates": args.replicates, **got,
                      "file_mib": round(files[0].stat().st_size / 2**20), "load_average": load}, indent=1))


if __name__ == "__main__":
    main()
