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

from sloguard.config.units import parse_duration
from sloguard.slo.status import render_status

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


def _wait_http(url: str, deadline: float, proc: subprocess.Popen[bytes]) -> bool:
    """Poll url until it answers 200; give up at the deadline or as soon as `proc` has exited."""
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


def duration_arg(text: str) -> float:
    """Parse --duration: seconds (`60`) or a config-style duration (`90s`, `1m`, `1h30m`)."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_duration(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def fault_help(sim_url: str) -> str:
    """Return the lines the demo prints first: the simulator's URL and ready-to-copy fault commands."""
    return (f"simulator: {sim_url}\n"
            "inject a fault from another shell (then watch the SLO lines below move):\n"
            f"  curl -XPOST {sim_url}/sim/faults -d '{{\"latency_multiplier\": 4}}'\n"
            f"  curl -XDELETE {sim_url}/sim/faults      # back to normal\n"
            "  other faults: stall_first_token_s, error_rate, hang, garbage_metrics, network_delay_s;\n"
            "  each of these gets a bottleneck verdict: load_multiplier, kv_blocks, prompt_scale, gpu_clock_ratio,\n"
            "  cpu_burn, engine_restart_s (README 'Diagnosis')\n")


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


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="sloguard demo", description="Run the simulator and the daemon and show "
                                 "live SLO status until --duration elapses or Ctrl-C.")
    ap.add_argument("--duration", type=duration_arg, default=0.0,
                    help="how long to run: seconds or a duration such as 90s, 1m, 1h (0 = until Ctrl-C)")
    ap.add_argument("--listen", default="127.0.0.1:9478", help="daemon listen address (default 127.0.0.1:9478)")
    ap.add_argument("--sim-port", type=int, default=0, help="simulator port on 127.0.0.1 (default: a free one)")
    ap.add_argument("--state-dir", default="", help="default: a temporary directory, removed at the end")
    return ap


def main(argv: list[str]) -> int:
    """Run the demo until --duration elapses or Ctrl-C; return 0 when both processes ran."""
    args = _parser().parse_args(argv)
    sim_port = args.sim_port or free_port()
    sim_url = f"http://127.0.0.1:{sim_port}"
    state = Path(args.state_dir or tempfile.mkdtemp(prefix="sloguard-demo-"))
    temporary = not args.state_dir
    state.mkdir(parents=True, exist_ok=True)
    cfg_path = state / "demo.yaml"
    cfg_path.write_text(demo_config(sim_port, args.listen, str(state)))
    print(fault_help(sim_url), flush=True)
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
        if not _wait_http(f"{sim_url}/v1/models", time.monotonic() + 30, sim):
            print(f"sloguard demo: the simulator did not come up on {sim_url} (port in use? pick another with "
                  "--sim-port)", file=sys.stderr)
            return 1
        if not _wait_http(f"{base}/-/healthy", time.monotonic() + 30, daemon):
            print(f"sloguard demo: the daemon did not come up on {args.listen}; see its error above "
                  "(pick another address with --listen)", file=sys.stderr)
            return 1
        print(f"sloguard:  {base}/  (status page)  {base}/metrics  {base}/api/v1/slos\n"
              f"config:    {cfg_path}\n", flush=True)
        _status_loop(base, args.duration, daemon, stop)
        return 0 if daemon.poll() is None else 1
    finally:
        _stop_all(daemon, sim)
        if temporary:
            shutil.rmtree(state, ignore_errors=True)
