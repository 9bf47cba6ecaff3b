"""Start the simulator, the daemon and Prometheus as real processes on loopback for end-to-end tests."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# Deadlines in e2e tests are hang guards, never timing claims (those live in benchmarks/): CI shares 2 busy cores,
# so every wait, and every HTTP call's socket timeout, gets PATIENCE times the seconds its caller names.
PATIENCE = float(os.environ.get("SLOGUARD_TEST_PATIENCE", "3"))


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 3.0, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """GET url; return (status, body) without raising on HTTP errors."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout * PATIENCE) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def http_post(url: str, body: Any = None, method: str = "POST", timeout: float = 5.0) -> tuple[int, bytes]:
    """POST (or DELETE/PUT) JSON; return (status, body)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout * PATIENCE) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_until(check: Callable[[], bool], timeout: float, what: str, step: float = 0.2) -> float:
    """Poll `check` until true; return the seconds it took; fail with `what` after PATIENCE × timeout."""
    timeout *= PATIENCE
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if check():
                return time.monotonic() - start
        except OSError:
            pass
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


@dataclass
class Proc:
    """A started process and where it listens."""

    popen: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, timeout: float = 12.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return int(self.popen.returncode)


def _spawn(args: list[str], log: Path, port: int) -> Proc:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as fh:
        popen = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    return Proc(popen, port, log)


@contextmanager
def simulator(tmp: Path, seed: int = 1, extra: tuple[str, ...] = ()) -> Iterator[Proc]:
    """Run `sloguard sim` on a free port until the block exits."""
    port = free_port()
    proc = _spawn([sys.executable, "-m", "sloguard", "sim", "--listen", f"127.0.0.1:{port}", "--seed", str(seed),
                   *extra], tmp / f"sim-{port}.log", port)
    try:
        wait_until(lambda: http_get(f"{proc.url}/v1/models")[0] == 200, 30, "the simulator")
        yield proc
    finally:
        proc.stop()


def start_daemon(tmp: Path, config_text: str, extra: tuple[str, ...] = (), name: str = "sloguard.yaml") -> Proc:
    """Write the config (its listen must be 127.0.0.1:PORT) and start `sloguard run`; wait for /-/healthy."""
    cfg = tmp / name
    cfg.write_text(config_text)
    port = int(config_text.split('listen: "127.0.0.1:', 1)[1].split('"', 1)[0])
    proc = _spawn([sys.executable, "-m", "sloguard", "run", "-c", str(cfg), *extra], tmp / f"daemon-{port}.log", port)
    try:
        scheme = "https" if any("web.config" in e for e in extra) else "http"
        if scheme == "http":
            wait_until(lambda: http_get(f"{proc.url}/-/healthy")[0] == 200 or proc.popen.poll() is not None, 30,
                       "the daemon")
        else:
            wait_until(lambda: _port_open(port) or proc.popen.poll() is not None, 30, "the daemon (TLS)")
    except AssertionError:
        proc.stop()
        raise AssertionError(f"daemon did not start:\n{proc.output()}") from None
    if proc.popen.poll() is not None:
        raise AssertionError(f"daemon exited {proc.popen.returncode}:\n{proc.output()}")
    return proc


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def sim_target(sim: Proc, extra: str = "") -> str:
    """Return the `targets:` entry `sim` of a running simulator (1 s scrapes), with `extra` lines appended."""
    return f"""\
  - name: sim
    engine: vllm
    metrics_url: {sim.url}/metrics
    api_url: {sim.url}
    model: sim-llama-3-8b
    scrape_interval: 1s
    scrape_timeout: 900ms
{extra}"""


def sim_config(sim: Proc, port: int, state_dir: Path, probe_interval: str = "1s", eval_interval: str = "1s",
               extra: str = "") -> str:
    """Return a short-interval daemon config against a running simulator."""
    return f"""\
version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state_dir}"
evaluation_interval: {eval_interval}
targets:
{sim_target(sim)}probes:
  - name: sim-chat
    target: sim
    api: chat
    interval: {probe_interval}
    timeout: 900ms
    max_tokens: 16
    prompts: [{{tokens: 64, weight: 2}}, {{tokens: 512, weight: 1}}]
slos:
  - name: sim-latency
    target: sim
    source: probe
    objectives: [{{metric: ttft, percentile: 95, threshold: 500ms}}, {{metric: tpot, percentile: 50, threshold: 50ms}}]
    goodput: {{ttft: 500ms, tpot: 50ms, target: 0.95}}
    error_rate: {{target: 0.99}}
    error_budget_window: 1d
    budgets: {{connect: 10ms, ttft: 400ms, decode: 1500ms}}
  - name: sim-server
    target: sim
    source: server
    objectives: [{{metric: ttft, percentile: 95, threshold: 1s}}]
notifiers:
  - {{name: console, type: log, group_wait: 0s}}
{extra}"""


def prom_binary() -> str:
    """Return the prometheus binary; fail (not skip) when missing: scripts/setup.sh installs it."""
    path = shutil.which("prometheus")
    if path is None:
        raise AssertionError("prometheus not on PATH: run scripts/setup.sh")
    return path


@contextmanager
def prometheus(tmp: Path, scrape_port: int, rule_files: tuple[Path, ...] = (), interval: str = "1s",
               more_ports: tuple[int, ...] = ()) -> Iterator[Proc]:
    """Run a real Prometheus scraping 127.0.0.1:scrape_port (and `more_ports`) every `interval`."""
    port = free_port()
    rules = "\n".join(f"  - {p}" for p in rule_files)
    cfg = tmp / f"prometheus-{port}.yml"
    cfg.write_text(f"""global:
  scrape_interval: {interval}
  evaluation_interval: {interval}
rule_files:
{rules or '  []'}
scrape_configs:
  - job_name: sloguard
    static_configs: [{{targets: [{", ".join(f'"127.0.0.1:{p}"' for p in (scrape_port, *more_ports))}]}}]
""".replace("rule_files:\n  []", "rule_files: []"))
    proc = _spawn([prom_binary(), f"--config.file={cfg}", f"--storage.tsdb.path={tmp / f'tsdb-{port}'}",
                   f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle"], tmp / f"prom-{port}.log", port)
    try:
        wait_until(lambda: http_get(f"{proc.url}/-/ready")[0] == 200, 30, "Prometheus")
        yield proc
    finally:
        proc.stop()


def prom_query(prom: Proc, query: str, at: float | None = None) -> list[dict[str, Any]]:
    """Run an instant query; return the result vector; raise on a PromQL error."""
    params = {"query": query}
    if at is not None:
        params["time"] = str(at)
    status, body = http_get(f"{prom.url}/api/v1/query?{urllib.parse.urlencode(params)}")
    doc = json.loads(body)
    if status != 200 or doc.get("status") != "success":
        raise AssertionError(f"query failed ({status}): {query}: {doc.get('error')}")
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


def metric_value(exposition: str, name: str, labels: dict[str, str] | None = None) -> float | None:
    """Return the first sample value of `name` matching `labels` in a text exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    for fam in text_string_to_metric_families(exposition):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in (labels or {}).items()):
                return float(s.value)
    return None



