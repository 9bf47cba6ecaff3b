"""`sloguard demo`: the simulator plus the daemon on an embedded config, with live SLO status in the terminal."""

from __future__ import annotations

import argparse
import json
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
    prompts: [{{tokens: 64, weight: 50}}, {{tokens: 512, weight: 35}}, {{tokens: 3000, weight: 15}}]
slos:
  - name: sim-chat-latency
    target: sim
    source: probe
    objectives:
      - {{metric: ttft, percentile: 95, threshold: 500ms}}
      - {{metric: tpot, percentile: 50, threshold: 50ms}}
    goodput: {{ttft: 500ms, tpot: 50ms, target: 0.95}}
    error_rate: {{target: 0.99}}
    error_budget_window: 1d
    budgets: {{connect: 10ms, ttft: 400ms, decode: 1500ms, network: 50ms}}
  - name: sim-server
    target: sim
    source: server
    objectives:
      - {{metric: ttft, percentile: 95, threshold: 1s}}
      - {{metric: queue, percentile: 95, threshold: 250ms}}
alerts:
  - name: DemoHighTTFT
    expr: 'sloguard_slo_quantile_seconds{{slo="sim-chat-latency",metric="ttft",quantile="0.95",window="5m"}} > 0.5'
    for: 10s
    severity: page
    summary: "p95 TTFT {{{{ $value }}}}s above 500ms on {{{{ $labels.slo }}}}"
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


def render_status(api: Any) -> str:
    """Render /api/v1/slos as a few terminal lines per SLO."""
    lines = []
    for slo in api.get("slos", []) if isinstance(api, dict) else []:
        lines.append(f"SLO {slo.get('name')} ({slo.get('source')}, target {slo.get('target')})")
        for o in slo.get("objectives", []):
            win = o.get("windows", {}).get("5m", o)
            ok = win.get("compliant")
            mark = "no data" if ok is None else ("OK " if ok else "BAD")
            lines.append(f"  {mark:7} p{o.get('percentile'):g} {o.get('metric')}: {_fmt(win.get('value'))} "
                         f"(objective {_fmt(o.get('threshold'))})")
        gp = slo.get("goodput")
        if isinstance(gp, dict):
            g5 = gp.get("windows", {}).get("5m", {})
            lines.append(f"  goodput 5m: {_fmt(g5.get('ratio'))} (target {gp.get('target')})")
        budget = slo.get("error_budget_remaining")
        if budget is not None:
            lines.append(f"  error budget remaining: {budget:.1%}")
    return "\n".join(lines) or "(waiting for the first evaluation)"


def main(argv: list[str]) -> int:
    """Run the demo until --duration elapses or Ctrl-C; return 0 when both processes ran."""
    ap = argparse.ArgumentParser(prog="sloguard demo")
    ap.add_argument("--duration", type=float, default=0, help="seconds to run (0 = until Ctrl-C)")
    ap.add_argument("--listen", default="127.0.0.1:9478", help="daemon listen address")
    ap.add_argument("--sim-port", type=int, default=0)
    ap.add_argument("--state-dir", default="", help="default: a temporary directory")
    args = ap.parse_args(argv)
    sim_port = args.sim_port or free_port()
    state = args.state_dir or tempfile.mkdtemp(prefix="sloguard-demo-")
    cfg_path = Path(state) / "demo.yaml"
    Path(state).mkdir(parents=True, exist_ok=True)
    cfg_path.write_text(demo_config(sim_port, args.listen, state))
    py = sys.executable
    sim = subprocess.Popen([py, "-m", "sloguard", "sim", "--listen", f"127.0.0.1:{sim_port}", "--seed", "1"],
                           stdout=subprocess.DEVNULL)
    daemon = subprocess.Popen([py, "-m", "sloguard", "run", "-c", str(cfg_path)])
    base = f"http://{args.listen}"
    stop = {"now": False}
    signal.signal(signal.SIGINT, lambda *_: stop.update(now=True))
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        if not _wait_http(f"{base}/-/healthy", time.monotonic() + 30):
            print("sloguard demo: the daemon did not come up; see the log above", file=sys.stderr)
            return 1
        print(f"\nsimulator: http://127.0.0.1:{sim_port}  (faults: POST /sim/faults)\n"
              f"sloguard:  {base}/metrics  {base}/api/v1/slos  {base}/debug/probes\n"
              f"config:    {cfg_path}\n", flush=True)
        end = time.monotonic() + args.duration if args.duration else float("inf")
        while not stop["now"] and time.monotonic() < end and daemon.poll() is None:
            try:
                print(time.strftime("%H:%M:%S"), render_status(_get_json(f"{base}/api/v1/slos")), sep="\n",
                      flush=True)
            except OSError as exc:
                print(f"status unavailable: {exc}", flush=True)
            time.sleep(min(5.0, max(0.0, end - time.monotonic())))
        return 0 if daemon.poll() is None else 1
    finally:
        for proc in (daemon, sim):
            if proc.poll() is None:
                proc.terminate()
        for proc in (daemon, sim):
            try:
                proc.wait(timeout=12)
            except subprocess.TimeoutExpired:
                proc.kill()
