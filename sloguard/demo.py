"""`sloguard demo`: the simulator plus the daemon on an embedded config, with live SLO status in the terminal."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

DEMO_CONFIG = """\
version: sloguard/v1
listen: "{listen}"
state_dir: "{state_dir}"
evaluation_interval: 5s
targets:
  - name: sim
    engine: vllm
    metrics_url: http://127.0.0.1:{sim_port}/metrics
    api_url: http://127.0.0.1:{sim_port}
    model: sim-llama-3-8b
    scrape_interval: 5s
    scrape_timeout: 4s
probes:
  - name: sim-chat
    target: sim
    api: chat
    interval: 2s
    timeout: 1900ms
    max_tokens: 32
    prompts: [{{tokens: 64, weight: 50}}, {{tokens: 512, weight: 35}}, {{tokens: 1500, weight: 15}}]
slos:
  - name: sim-chat-latency
    target: sim
    source: probe
    objectives:
      - {{metric: ttft, percentile: 95, threshold: 1s}}
      - {{metric: tpot, percentile: 50, threshold: 50ms}}
    goodput: {{ttft: 1s, tpot: 50ms, target: 0.95}}
    error_rate: {{target: 0.99}}
    error_budget_window: 1d
    budgets: {{connect: 10ms, ttft: 800ms, decode: 1500ms, network: 50ms}}
  - name: sim-server
    target: sim
    source: server
    objectives:
      - {{metric: ttft, percentile: 95, threshold: 1s}}
      - {{metric: queue, percentile: 95, threshold: 500ms}}
alerts:
  - name: DemoHighTTFT
    expr: 'sloguard_slo_quantile_seconds{{slo="sim-chat-latency",metric="ttft",quantile="0.95",window="5m"}} > 1'
    for: 10s
    severity: page
    summary: "p95 TTFT {{{{ $value }}}}s above 1s on {{{{ $labels.slo }}}}"
notifiers:
  - name: console
    type: log
    group_wait: 0s
"""


def free_port() -> int:
    """Return a TCP port that was free on loopback a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo_config(sim_port: int, listen: str, state_dir: str) -> str:
    """Return the embedded demo config text for a simulator on sim_port."""
    return DEMO_CONFIG.format(sim_port=sim_port, listen=listen, state_dir=state_dir)


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as resp:
        return json.loads(resp.read())


def _wait_http(url: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v * 1000:.0f}ms" if v < 10 else f"{v:.1f}s"
    return "no data" if v is None else str(v)


def _at(items: list[dict[str, Any]], window: str) -> list[dict[str, Any]]:
    return [i for i in items if i.get("window") == window and not i.get("segment")]


def _slo_lines(slo: dict[str, Any], window: str = "5m") -> list[str]:
    lines = [f"SLO {slo.get('name')} ({slo.get('source')}, target {slo.get('target')}), 5m window:"]
    for o in _at(slo.get("objectives", []), window):
        ok = o.get("compliant")
        mark = "no data" if ok is None else ("OK" if ok else "BREACH")
        lines.append(f"  {mark:8} p{o.get('percentile'):g} {o.get('metric'):5} {_fmt(o.get('value')):>8}"
                     f"  (objective {_fmt(o.get('threshold'))})")
    for w in _at(slo.get("windows", []), window):
        if w.get("goodput_ratio") is not None:
            lines.append(f"  goodput {w['goodput_ratio']:.1%} (target {slo.get('goodput_target')}), "
                         f"{w.get('requests'):.0f} requests, burn rate {w.get('burn_rate') or 0:.2f}x")
    for s in _at(slo.get("stages", []), window):
        if s.get("budget") is not None and s.get("p95") is not None:
            lines.append(f"  stage {s['stage']:8} p95 {_fmt(s['p95']):>8} of budget {_fmt(s['budget'])}"
                         + (" (bounded)" if s.get("bounded") else ""))
    budget = slo.get("error_budget_remaining")
    if budget is not None:
        lines.append(f"  error budget remaining ({slo.get('window')}): {budget:.1%}")
    if slo.get("worst_stage"):
        lines.append(f"  most over budget: {slo['worst_stage']}")
    diagnosis = slo.get("diagnosis")
    if isinstance(diagnosis, dict) and diagnosis.get("summary"):
        lines.append(f"  diagnosis: {diagnosis['summary']}")
    return lines


def render_status(api: Any) -> str:
    """Render /api/v1/slos as a few terminal lines per SLO (the 5m window, all prompt buckets)."""
    slos = api.get("slos", []) if isinstance(api, dict) else []
    lines = [line for slo in slos for line in _slo_lines(slo)]
    return "\n".join(lines) or "(waiting for the first evaluation)"


def _status_loop(base: str, duration: float, daemon: subprocess.Popen[bytes], stop: dict[str, bool]) -> None:
    end = time.monotonic() + duration if duration else float("inf")
    while not stop["now"] and time.monotonic() < end and daemon.poll() is None:
        try:
            print(time.strftime("%H:%M:%S"), render_status(_get_json(f"{base}/api/v1/slos")), sep="\n", flush=True)
        except OSError as exc:
            print(f"status unavailable: {exc}", flush=True)
        time.sleep(min(5.0, max(0.0, end - time.monotonic())))


def _stop_all(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=12)
        except subprocess.TimeoutExpired:
            proc.kill()


def main(argv: list[str]) -> int:
    """Run the demo until --duration elapses or Ctrl-C; return 0 when both processes ran."""
    ap = argparse.ArgumentParser(prog="sloguard demo")
    ap.add_argument("--duration", type=float, default=0, help="seconds to run (0 = until Ctrl-C)")
    ap.add_argument("--listen", default="127.0.0.1:9478", help="daemon listen address")
    ap.add_argument("--sim-port", type=int, default=0)
    ap.add_argument("--state-dir", default="", help="default: a temporary directory")
    args = ap.parse_args(argv)
    sim_port = args.sim_port or free_port()
    state = Path(args.state_dir or tempfile.mkdtemp(prefix="sloguard-demo-"))
    temporary = not args.state_dir
    state.mkdir(parents=True, exist_ok=True)
    cfg_path = state / "demo.yaml"
    cfg_path.write_text(demo_config(sim_port, args.listen, str(state)))
    py = sys.executable
    sim = subprocess.Popen([py, "-m", "sloguard", "sim", "--listen", f"127.0.0.1:{sim_port}", "--seed", "1"],
                           stdout=subprocess.DEVNULL)
    daemon = subprocess.Popen([py, "-m", "sloguard", "run", "-c", str(cfg_path)])
    host, _, port = args.listen.rpartition(":")
    host = "127.0.0.1" if host.strip("[]") in ("", "0.0.0.0", "::") else host
    base, stop = f"http://{host}:{port}", {"now": False}
    signal.signal(signal.SIGINT, lambda *_: stop.update(now=True))
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        if not _wait_http(f"{base}/-/healthy", time.monotonic() + 30):
            print("sloguard demo: the daemon did not come up; see the log above", file=sys.stderr)
            return 1
        print(f"\nsimulator: http://127.0.0.1:{sim_port}  (faults: POST /sim/faults)\n"
              f"sloguard:  {base}/metrics  {base}/api/v1/slos  {base}/debug/probes\n"
              f"config:    {cfg_path}\n", flush=True)
        _status_loop(base, args.duration, daemon, stop)
        return 0 if daemon.poll() is None else 1
    finally:
        _stop_all(daemon, sim)
        if temporary:
            shutil.rmtree(state, ignore_errors=True)
