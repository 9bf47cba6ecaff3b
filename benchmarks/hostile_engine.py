"""Figures of issue 47's peer attacks on a real daemon: worst /metrics GET, RSS, whether evaluation kept counting.

Each scenario runs one daemon (`sloguard run` from --root, so a checkout of an older commit gives the "before"
figures) beside tests/support/hostile_engine.py: the `healthy` target plus the scenario's hostile ones, all
probed every second, identities read every second, for --seconds; /metrics is read every 0.25 s. Printed per
scenario: GETs, worst and p50 GET (wall), RSS at the first GET / peak / end (main + probe process), how many of
the healthy probe's requests the SLO counted in the window (about --seconds when nothing froze),
`sloguard_store_up` at the end and the exit code on SIGTERM. Then the alias bomb: `sloguard check` (wall, peak
RSS; stopped at 60 s) and SIGHUP into a running daemon (wall until the reload is reported failed, worst GET, RSS).

    .venv/bin/python benchmarks/hostile_engine.py                        # this tree
    .venv/bin/python benchmarks/hostile_engine.py --root /tmp/old-tree   # e.g. `git archive 75f0739 | tar -x`
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.hostile_engine import HostileEngine
from support.procs import free_port, http_get, metric_value

SCENARIOS = {"tokens": ("huge_tokens", "negative_tokens", "nan_tokens"), "many_models": ("many_models",),
             "long_model": ("long_model",), "control_bytes": ("control_bytes",)}
LOL = '["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'


def bomb() -> str:
    rows = [f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]" for p, n in zip("abcdefgh", "bcdefghi", strict=True)]
    return "\n".join(["version: sloguard/v1", f"a: &a {LOL}", *rows, "log: {format: *i}"]) + "\n"


def config(port: int, engine: HostileEngine, kinds: tuple[str, ...], state: str) -> str:
    names = ("healthy", *kinds)
    targets = "".join(f'  - {{name: {k}, engine: vllm, api_url: "{engine.url(k)}", model: m}}\n' for k in names)
    probes = "".join(f"  - {{name: {k}, target: {k}, interval: 1s, timeout: 900ms, max_tokens: 16}}\n" for k in names)
    return (f'version: sloguard/v1\nlisten: "127.0.0.1:{port}"\nstate_dir: "{state}"\nevaluation_interval: 1s\n'
            f'gpu: {{nvml: "off"}}\nreports: {{identity_interval: 1s}}\ntargets:\n{targets}probes:\n{probes}'
            "slos:\n  - {name: ux, target: healthy, probe: healthy, objectives: [{metric: ttft, percentile: 95, "
            "threshold: 5s}], goodput: {ttft: 5s, target: 0.9}, error_budget_window: 1d}\n")


def rss(pid: int) -> float:
    try:
        p = psutil.Process(pid)
        return sum(x.memory_info().rss for x in [p, *p.children(recursive=True)]) / 2**20
    except psutil.Error:
        return 0.0


def watch(url: str, pid: int, seconds: float) -> dict[str, object]:
    gets, mem, texts = [], [], []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        status, body = get(f"{url}/metrics")
        gets.append(time.perf_counter() - t)
        mem.append(rss(pid))
        if status == 200:
            texts.append(body.decode(errors="replace"))
        time.sleep(0.25)
    counted = [metric_value(x, "sloguard_slo_requests_total", {"slo": "ux", "good": "true"}) or 0.0 for x in texts]
    return {"gets": len(gets), "worst_ms": round(max(gets) * 1e3), "p50_ms": round(statistics.median(gets) * 1e3, 1),
            "rss_first": round(mem[0]), "rss_peak": round(max(mem)), "rss_end": round(mem[-1]),
            "counted": round(counted[-1] - counted[0]) if counted else None,
            "store_up": metric_value(texts[-1], "sloguard_store_up") if texts else None,
            "reload_ok": metric_value(texts[-1], "sloguard_config_last_reload_successful") if texts else None}


def get(url: str, timeout: float = 60.0) -> tuple[int, bytes]:
    """GET url; (0, b"") when it cannot be read (refused, reset, timed out)."""
    try:
        return http_get(url, timeout=timeout)
    except OSError:
        return 0, b""


def start(root: Path, cfg: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "sloguard", "run", "-c", str(cfg)], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 60
    while time.monotonic() < end and get(f"http://127.0.0.1:{port}/-/healthy", 2.0)[0] != 200:
        time.sleep(0.2)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def scenario(root: Path, engine: HostileEngine, kinds: tuple[str, ...], seconds: float, sighup: bool = False
             ) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        port, cfg = free_port(), Path(tmp) / "sloguard.yaml"
        cfg.write_text(config(port, engine, kinds, f"{tmp}/state"))
        proc = start(root, cfg, port)
        time.sleep(3)  # every attack delivered once
        if sighup:
            cfg.write_text(bomb())
            proc.send_signal(signal.SIGHUP)
        got = watch(f"http://127.0.0.1:{port}", proc.pid, seconds)
        got["exit"] = stop(proc)
        return got


def check_bomb(root: Path) -> dict[str, object]:
    """Run `sloguard check` on the bomb: wall seconds, exit code, peak RSS (polled); stopped at 60 s."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bomb.yaml"
        path.write_text(bomb())
        t, peak = time.perf_counter(), 0.0
        proc = subprocess.Popen([sys.executable, "-m", "sloguard", "check", "-c", str(path)], cwd=root,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and time.perf_counter() - t < 60:
            peak = max(peak, rss(proc.pid))
            time.sleep(0.05)
        code: object = proc.poll()
        if code is None:
            proc.kill()
            proc.wait()
            code = "killed at 60 s"
        return {"wall_s": round(time.perf_counter() - t, 1), "exit": code, "peak_rss_mib": round(peak)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]), help="the tree to run sloguard from")
    ap.add_argument("--seconds", type=float, default=15.0)
    args = ap.parse_args()
    root = Path(args.root)
    print(f"root {root}; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| scenario | GETs | worst GET ms | p50 GET ms | RSS first/peak/end MiB | healthy counted | store_up | "
          "reload ok | exit |\n|---|---|---|---|---|---|---|---|---|")
    with HostileEngine() as engine:
        for name, kinds in SCENARIOS.items():
            r = scenario(root, engine, kinds, args.seconds)
            print(f"| {name} | {r['gets']} | {r['worst_ms']} | {r['p50_ms']} | {r['rss_first']}/{r['rss_peak']}/"
                  f"{r['rss_end']} | {r['counted']} | {r['store_up']} | {r['reload_ok']} | {r['exit']} |", flush=True)
        r = scenario(root, engine, (), args.seconds, sighup=True)
        print(f"| SIGHUP alias bomb | {r['gets']} | {r['worst_ms']} | {r['p50_ms']} | {r['rss_first']}/"
              f"{r['rss_peak']}/{r['rss_end']} | {r['counted']} | {r['store_up']} | {r['reload_ok']} | {r['exit']} |")
    print(f"check alias bomb: {check_bomb(root)}; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
