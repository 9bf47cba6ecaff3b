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
from sloguard.incident import text

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
    dcgm_url: http://127.0.0.1:{sim_port}/dcgm/metrics  # the simulator's dcgm-exporter page: GPU throttle verdicts
host:  # the serving process's CPU and restarts: cpu_burn and engine_restart verdicts
  interval: 5s
  processes: [{{name: sim, target: sim, pid_file: "{state_dir}/sim.pid"}}]
diagnose: {{window: 60s}}  # a short window: baselines are learned within ~2 minutes of the start
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
    error_budget_window: 1h  # a demo-sized budget: a fault pages within about two minutes
    budgets: {{connect: 10ms, ttft: 800ms, decode: 1500ms, network: 50ms}}
  - name: sim-server
    target: sim
    source: server
    objectives:
      - {{metric: ttft, percentile: 95, threshold: 1s}}
      - {{metric: queue, percentile: 95, threshold: 500ms}}
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


# fault -> the cause the demo's config lets the diagnosis name (README "Diagnosis")
FAULTS: tuple[tuple[str, str, str], ...] = (
    ("load_multiplier", "4", "capacity"), ("kv_blocks", "160", "kv_cache_pressure"),
    ("prompt_scale", "4", "long_prompts"), ("gpu_clock_ratio", "0.35", "gpu_throttled"),
    ("cpu_burn", "1.0", "serving_cpu_bound"), ("network_delay_s", "0.3", "network"),
    ("engine_restart_s", "5", "engine_restart"), ("error_rate", "0.3", "failures by kind"),
)


def fault_help(sim_url: str) -> str:
    """Return the lines the demo keeps on screen: the simulator's URL and ready-to-copy fault commands."""
    rows = "\n".join(f"  curl -XPOST {sim_url}/sim/faults -d '{{\"{k}\": {v}}}'   # -> {why}" for k, v, why in FAULTS)
    return (f"simulator: {sim_url}   inject one fault from another shell, then watch the SLO below:\n{rows}\n"
            f"  curl -XDELETE {sim_url}/sim/faults   # back to normal\n")


def _snapshot(base: str) -> str:
    try:
        return text.render(_get_json(f"{base}/api/v1/slos").get("slos") or [])
    except (OSError, ValueError, AttributeError) as exc:
        return f"status unavailable: {exc}"


def _status_loop(base: str, duration: float, daemon: subprocess.Popen[bytes], stop: dict[str, bool],
                 header: str, tty: bool) -> None:
    """Redraw the status in place on a terminal; when piped, print it only when it changes (at most every 5 s)."""
    end = time.monotonic() + duration if duration else float("inf")
    last = ""
    while not stop["now"] and time.monotonic() < end and daemon.poll() is None:
        now = _snapshot(base)
        if tty:
            print(f"\x1b[H\x1b[2J{header}\n{time.strftime('%H:%M:%S')}\n{now}", flush=True)
        elif now != last:
            print(time.strftime("%H:%M:%S"), now, sep="\n", flush=True)
        last = now
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
    py = sys.executable
    sim = subprocess.Popen([py, "-m", "sloguard", "sim", "--listen", f"127.0.0.1:{sim_port}", "--seed", "1"],
                           stdout=subprocess.DEVNULL)
    (state / "sim.pid").write_text(str(sim.pid))  # the config's host.processes watches the simulator
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
        header = (f"{fault_help(sim_url)}sloguard:  {base}/  (status page)  {base}/metrics  {base}/api/v1/slos\n"
                  f"config:    {cfg_path}\n")
        print(header, flush=True)
        _status_loop(base, args.duration, daemon, stop, header, sys.stdout.isatty())
        return 0 if daemon.poll() is None else 1
    finally:
        _stop_all(daemon, sim)
        if temporary:
            shutil.rmtree(state, ignore_errors=True)
