"""The unhappy path's effect on the well-behaved requests: `sloguard bench` normal-only vs a mix, same seed.

Four `sloguard bench` runs against `sloguard sim` (no background load, a fresh simulator with the same seed
each time, so every run starts from the same state): on a healthy simulator and on one with the fault
`leak_on_cancel`, the same open-loop Poisson load (same `--seed`: the same arrival times and sizes) once with
normal requests only and once with the mix (default normal:90,disconnect@8:5,oversized:3,slow_reader@10:2).
Open loop, so a slow reader or a hang-up does not change when the next request is sent (a closed loop would
lend its stream to fewer normal requests). Prints the normal requests' TTFT and E2E p50/p95 and goodput for
each run, the mix's difference against normal-only, the server's view of the measured window (running and
waiting requests, mean and max, from the bench's own scrapes) and the simulator's counters over the whole run
(requests finished `abort`, tokens generated). Expected: on a healthy server a hang-up costs one step (the
request leaves the batch), so the normal figures barely move; under `leak_on_cancel` each hang-up generates
its full max_tokens for nobody, holding a batch slot, so near the batch limit (max_batch 32; at 5 req/s of
256-token prompts and 128 output tokens the batch runs about three quarters full) the queue grows and the
normal requests' latency with it. The mix also sends less work than normal-only on a healthy server (a
hang-up stops after 8 tokens, an oversized prompt is refused), so the column that isolates the leak is
"mix: leak - healthy": the same requests, only the fault differs. The two normal-only runs send the same
requests to a server on which the fault has nothing to act: their difference is the run-to-run noise.

Run: .venv/bin/python benchmarks/unhappy_path.py [--rate 5] [--requests 300] [--seed 7]
(about 5 minutes: four runs of ~65 s at the defaults)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.procs import http_post, simulator, wait_until

MIX = "normal:90,disconnect@8:5,oversized:3,slow_reader@10:2"
FAULTS: tuple[tuple[str, dict[str, Any]], ...] = (("healthy", {}), ("leak_on_cancel", {"leak_on_cancel": True}))
MAX_TOKENS, PROMPT_TOKENS = 128, 256
SLO = "chat"


def config(url: str) -> str:
    """Return a config with the simulator as target, a chat probe as workload and a goodput SLO."""
    return f"""version: sloguard/v1
targets:
  - {{name: sim, engine: vllm, api_url: "{url}", metrics_url: "{url}/metrics", model: sim-llama-3-8b}}
probes:
  - {{name: chat, target: sim, api: chat, max_tokens: {MAX_TOKENS}, ignore_eos: true, timeout: 60s, interval: 5m,
     prompts: [{{tokens: {PROMPT_TOKENS}}}]}}
slos:
  - name: {SLO}
    target: sim
    objectives: [{{metric: ttft, percentile: 95, threshold: 500ms}}]
    goodput: {{ttft: 500ms, tpot: 60ms, target: 0.95}}
"""


def run(tmp: Path, faults: dict[str, Any], behaviours: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one bench stage on a fresh simulator; return its stage row."""
    tmp.mkdir(parents=True, exist_ok=True)
    extra = ("--background-rps", "0", "--max-model-len", "4096")
    with simulator(tmp, seed=args.seed, extra=extra) as sim:
        if faults:
            assert http_post(f"{sim.url}/sim/faults", faults)[0] == 200
        cfg, out = tmp / "sloguard.yaml", tmp / "results.jsonl"
        cfg.write_text(config(sim.url))
        cmd = [sys.executable, "-m", "sloguard", "bench", "-c", str(cfg), "--target", "sim", "-o", str(out),
               "--rate", str(args.rate), "--requests", str(args.requests), "--warmup", str(args.requests // 10),
               "--seed", str(args.seed), "--behaviours", behaviours,
               "--no-nvml"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            raise SystemExit(f"bench failed ({done.returncode}): {done.stderr[-2000:]}")
        wait_until(lambda: _counter(sim.url, "vllm:num_requests_running") == 0, 300, "leaked requests to finish")
        sim_counts = {"aborts": _counter(sim.url, "vllm:request_success_total", 'finished_reason="abort"'),
                      "generated": _counter(sim.url, "vllm:generation_tokens_total")}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    (stage,) = [r for r in rows if r["type"] == "stage"]
    return {**stage, "sim": sim_counts}


def _counter(url: str, name: str, label: str = "") -> float:
    """Return the sum of a series of the simulator's /metrics whose labels contain `label`."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        page = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in page.splitlines()
               if line.startswith(name + "{") and label in line)


def figures(stage: dict[str, Any]) -> dict[str, float | None]:
    """Return the normal requests' latency and goodput, and the server's view, of one stage row."""
    lat, server = stage["latency"], stage.get("server") or {}
    gauges = server.get("gauges", {})

    def gauge(name: str, stat: str) -> float | None:
        return gauges.get(name, {}).get(stat)

    return {
        "ttft_p50_ms": _ms(lat["ttft"]["p50"]), "ttft_p95_ms": _ms(lat["ttft"]["p95"]),
        "e2e_p50_ms": _ms(lat["e2e"]["p50"]), "e2e_p95_ms": _ms(lat["e2e"]["p95"]),
        "goodput": stage["goodput"][SLO]["ratio"],
        "running_mean": gauge("requests_running", "mean"), "running_max": gauge("requests_running", "max"),
        "waiting_mean": gauge("requests_waiting", "mean"), "waiting_max": gauge("requests_waiting", "max"),
        "sim_aborts": stage["sim"]["aborts"], "sim_tokens_generated": stage["sim"]["generated"],
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}" if abs(v) < 10 else f"{v:.0f}"


def _diff(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "-"
    pct = f" ({(b - a) / a * 100:+.0f}%)" if a else ""
    return f"{b - a:+.3g}{pct}" if abs(b - a) < 10 else f"{b - a:+.0f}{pct}"


def table(runs: dict[tuple[str, str], dict[str, float | None]]) -> str:
    """Return every run side by side with the differences that matter, as a markdown table."""
    cols = [(f, m) for f, _ in FAULTS for m in ("base", "mix")]
    head = ["healthy normal-only", "healthy mix", "leak normal-only", "leak mix", "healthy: mix - normal-only",
            "leak: mix - normal-only", "mix: leak - healthy"]
    lines = ["| figure | " + " | ".join(head) + " |", "|" + " --- |" * (len(head) + 1)]
    h, lk = "healthy", "leak_on_cancel"
    for key in runs[(h, "base")]:
        row = [_fmt(runs[c][key]) for c in cols]
        row += [_diff(runs[(h, "base")][key], runs[(h, "mix")][key]),
                _diff(runs[(lk, "base")][key], runs[(lk, "mix")][key]),
                _diff(runs[(h, "mix")][key], runs[(lk, "mix")][key])]
        lines.append(f"| {key} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> int:
    """Run the four stages and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=300, help="measured requests per run (+10 %% warm-up)")
    ap.add_argument("--rate", type=float, default=5.0, help="open-loop requests/s (Poisson)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--behaviours", default=MIX)
    args = ap.parse_args()
    print(f"sloguard bench vs sloguard sim: --rate {args.rate:g} --requests {args.requests} "
          f"--warmup {args.requests // 10} --seed {args.seed}; prompts {PROMPT_TOKENS} tokens, max_tokens {MAX_TOKENS} "
          f"(ignore_eos); goodput = TTFT <= 500 ms and TPOT <= 60 ms; normal requests' figures only\n")
    runs: dict[tuple[str, str], dict[str, float | None]] = {}
    with tempfile.TemporaryDirectory(prefix="sloguard-unhappy-") as tmp:
        for name, faults in FAULTS:
            for label, mix in (("base", "normal:1"), ("mix", args.behaviours)):
                runs[(name, label)] = figures(run(Path(tmp) / f"{name}-{label}", faults, mix, args))
                print(f"  done: {name}, {mix}", file=sys.stderr, flush=True)
    print(f"mix = {args.behaviours}\n")
    print(table(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
