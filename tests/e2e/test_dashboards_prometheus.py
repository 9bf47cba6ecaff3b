"""Every dashboard query parses and returns data in a real Prometheus scraping a real sloguard.

Simulator -> sloguard daemon (short intervals) -> Prometheus (1 s scrapes, alerts/*.yaml loaded). After a
warm-up, every panel query of every dashboard, with its template variables set to values found in the
data, must return at least one finite sample; panels that show only faults are checked after the test
injects errors and latency into the simulator. GPU panels are checked only where a GPU is present.
Set SLOGUARD_E2E_REPORT=FILE to write the per-panel table there.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import runpy
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.procs import PATIENCE

pytestmark = pytest.mark.e2e  # deadlines below are hang guards × PATIENCE, as is the test's (conftest)

ROOT = Path(__file__).resolve().parents[2]
PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
WARMUP_S, NORMAL_DEADLINE_S, FAULT_DEADLINE_S = 15.0, 45.0, 30.0
# Grafana's built-in interval variables: the rate window covers several 1 s scrapes and 2 s probes.
BUILTINS = {"$__rate_interval": "20s", "$__interval": "2s", "$__range": "5m"}
FAULTS = {"error_rate": 0.5, "latency_multiplier": 4.0}


@dataclass
class Check:
    dashboard: str
    panel: str
    requires: str
    expr: str
    status: str = "not run"  # "data", "no data", "skipped: ...", "error: ..."
    before_fault: str = ""  # fault panels: the status just before the faults were injected


class RequestFailed(Exception):
    """An HTTP error reply, with its body."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http(url: str, data: bytes | None = None, method: str | None = None) -> Any:
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
    except urllib.error.HTTPError as err:  # Prometheus explains a 400 (a query that does not parse) in JSON
        raise RequestFailed(f"{err.code} {err.read()[:500]!r} for {urllib.parse.unquote(url)}") from None
    return json.loads(body) if body[:1] in (b"{", b"[") else body


def _wait_http(url: str, proc: subprocess.Popen[str], what: str, deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s * PATIENCE
    while time.monotonic() < end:
        assert proc.poll() is None, f"{what} exited with {proc.returncode}"
        try:
            _http(url)
            return
        except (RequestFailed, urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    pytest.fail(f"{what} not ready at {url} within {deadline_s}s")


def _has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([str(smi), "-L"], capture_output=True, timeout=20).returncode == 0


def _daemon_config(sim: str, listen: str, state: Path, gpu: bool) -> dict[str, Any]:
    return {
        "version": "sloguard/v1", "listen": listen, "state_dir": str(state), "evaluation_interval": "1s",
        # Baselines span one diagnosis window before stage excess is exported: 10 s, not the default 5 min.
        "diagnose": {"window": "10s"},
        "targets": [{"name": "sim", "engine": "vllm", "metrics_url": f"{sim}/metrics", "api_url": sim,
                     "model": "sim-llama-3-8b",
                     "scrape_interval": "1s", "scrape_timeout": "900ms",
                     "guardrails": {"prefix_cache_hit_ratio": {}, "spec_decode_acceptance": {}}}],
        "probes": [{"name": "sim-chat", "target": "sim", "api": "chat", "interval": "2s", "timeout": "1900ms",
                    "max_tokens": 16, "prompts": [{"tokens": 64, "weight": 2}, {"tokens": 1024}]},
                   # guardrail checks: the Guardrails row's panels read them
                   {"name": "sim-abort", "target": "sim", "kind": "abort", "interval": "5s", "timeout": "4s"},
                   {"name": "sim-oversized", "target": "sim", "kind": "oversized_prompt", "interval": "5s",
                    "timeout": "4s"}],
        "slos": [{"name": "sim-latency", "target": "sim", "probe": "sim-chat",
                  # Loose enough that the healthy simulator meets them: only the injected faults burn budget.
                  "objectives": [{"metric": "ttft", "percentile": 95, "threshold": "3s"},
                                 {"metric": "tpot", "percentile": 50, "threshold": "500ms"},
                                 {"metric": "e2e", "percentile": 99, "threshold": "5s"}],
                  "goodput": {"ttft": "3s", "tpot": "500ms", "target": 0.99},
                  "error_rate": {"target": 0.999},
                  "budgets": {"queue": "100ms", "prefill": "300ms", "decode": "1s",
                              "network": {"p95": "50ms", "owner": "platform-network"}},
                  "segment_by": "prompt_bucket"}],
        "alerts": [{"name": "SimErrorRatioHigh", "severity": "page", "summary": "probe errors",
                    "expr": 'sloguard_slo_error_ratio{slo="sim-latency",window="5m"} > 0.05'}],
        "notifiers": [{"name": "log", "type": "log"}],
        "gpu": {"nvml": "on" if gpu else "off", "interval": "2s",
                "canary": {"enabled": gpu, "interval": "20s", "device": "auto"}},
    }


def _prometheus_config(daemon: str, rule_files: list[str]) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
        "rule_files": rule_files,
        "scrape_configs": [{"job_name": "sloguard", "honor_labels": True,
                            "static_configs": [{"targets": [daemon]}]}],
    }


def _rule_files() -> list[str]:
    files = [str(p) for p in sorted((ROOT / "alerts").glob("*.yaml"))
             if "groups" in (yaml.safe_load(p.read_text()) or {})]
    assert files, "alerts/ holds no rule files"
    return files


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Start simulator, daemon and Prometheus on loopback; stop them all (SIGTERM, then SIGKILL)."""
    prom_bin = shutil.which("prometheus")
    assert prom_bin, "prometheus is not on PATH: scripts/setup.sh installs it"
    tmp = tmp_path_factory.mktemp("dashboards-e2e")
    procs: list[subprocess.Popen[str]] = []

    def start(args: list[str], log: str) -> subprocess.Popen[str]:
        out = (tmp / log).open("w")
        proc = subprocess.Popen(args, stdout=subprocess.PIPE if log == "sim.log" else out, stderr=out, text=True,
                                cwd=tmp)
        procs.append(proc)
        return proc

    try:
        sim_proc = start([PY, "-m", "sloguard", "sim", "--listen", "127.0.0.1:0", "--seed", "7",
                          "--background-rps", "4", "--spec-tokens", "3"], "sim.log")
        assert sim_proc.stdout
        line = sim_proc.stdout.readline()
        match = re.search(r"http://\S+", line)
        assert match, f"simulator did not print its URL: {line!r}"
        sim = match.group(0)
        gpu = _has_gpu()
        daemon_addr = f"127.0.0.1:{_free_port()}"
        cfg = tmp / "sloguard.yaml"
        cfg.write_text(yaml.safe_dump(_daemon_config(sim, daemon_addr, tmp / "state", gpu)))
        daemon = start([PY, "-m", "sloguard", "run", "-c", str(cfg)], "daemon.log")
        _wait_http(f"http://{daemon_addr}/-/ready", daemon, "sloguard daemon")
        prom_addr = f"127.0.0.1:{_free_port()}"
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(_prometheus_config(daemon_addr, _rule_files())))
        prom = start([prom_bin, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                      f"--web.listen-address={prom_addr}"], "prometheus.log")
        _wait_http(f"http://{prom_addr}/-/ready", prom, "prometheus")
        yield {"sim": sim, "prom": f"http://{prom_addr}", "gpu": gpu, "tmp": tmp}
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


@functools.cache
def _build() -> dict[str, Any]:
    """Return the globals of dashboards/build.py: DASHBOARDS (panels, queries, requires) and VARIABLES."""
    return runpy.run_path(str(ROOT / "dashboards" / "build.py"), run_name="sloguard_dashboards_build")


def _load_checks() -> list[Check]:
    return [Check(d.title, p.title, p.requires, q.expr)
            for d in _build()["DASHBOARDS"].values() for p in d.panels for q in p.queries]


def _variables(prom: str) -> dict[str, str]:
    """Resolve each query variable of the dashboards, in order, to one value present in Prometheus."""
    values: dict[str, str] = {}
    for var in _build()["VARIABLES"]:
        if var["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.*), (\w+)\)", var["query"]["query"])
        assert match, var["query"]["query"]
        selector, label = _substitute(match.group(1), values), match.group(2)
        url = f"{prom}/api/v1/series?" + urllib.parse.urlencode({"match[]": selector, "start": time.time() - 300})
        found = sorted({s[label] for s in _http(url)["data"] if s.get(label)})
        assert found, f"variable {var['name']}: no values for {selector}"
        preferred = var.get("current", {}).get("value")
        values[var["name"]] = preferred if preferred in found else found[0]
    return values


def _regex_literal(value: str) -> str:
    """Escape a value for `=~"..."` as Grafana does: regex metacharacters, then PromQL string backslashes."""
    return re.sub(r"([.*+?^${}()|\[\]\\])", r"\\\\\1", value)


def _substitute(expr: str, values: dict[str, str]) -> str:
    for name, value in sorted(values.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(f"${name}", _regex_literal(value))
    for name, value in BUILTINS.items():
        expr = expr.replace(name, value)
    return expr


def _run(prom: str, check: Check, values: dict[str, str]) -> str:
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": _substitute(check.expr, values)})
    try:
        reply = _http(url)
    except RequestFailed as err:
        return f"error: {err}"
    result = reply["data"]["result"]
    finite = [s for s in result if not math.isnan(float(s["value"][1]))]
    return "data" if finite else "no data"


def _poll(prom: str, checks: list[Check], values: dict[str, str], deadline_s: float) -> None:
    end = time.monotonic() + deadline_s * PATIENCE  # returns as soon as every query has data
    while True:
        for check in checks:
            if check.status != "data":
                check.status = _run(prom, check, values)
        if all(c.status == "data" or c.status.startswith("error") for c in checks) or time.monotonic() > end:
            return
        time.sleep(2)


def _report(checks: list[Check], path: str | None) -> str:
    lines = [f"| {c.dashboard} | {c.panel} | {c.requires or '-'} | {c.before_fault or '-'} | {c.status} |"
             for c in checks]
    header = "| dashboard | panel | requires | before fault | result |\n|---|---|---|---|---|"
    table = "\n".join([header, *lines])
    if path:
        Path(path).write_text(table + "\n")
    return table


def test_every_dashboard_query_returns_data(stack: dict[str, Any]) -> None:
    prom, checks = stack["prom"], _load_checks()
    time.sleep(WARMUP_S)  # let probes, scrapes and evaluations fill the windows
    values = _variables(prom)
    for check in checks:
        if check.requires == "gpu_fault" or (check.requires == "gpu" and not stack["gpu"]):
            check.status = f"skipped: needs {check.requires.replace('_', ' ')}"
    _poll(prom, [c for c in checks if c.requires in ("", "gpu") and c.status == "not run"], values,
          NORMAL_DEADLINE_S)
    faulty = [c for c in checks if c.requires == "fault"]
    for check in faulty:
        check.before_fault = _run(prom, check, values)
    _http(f"{stack['sim']}/sim/faults", json.dumps(FAULTS).encode(), "POST")
    _poll(prom, faulty, values, FAULT_DEADLINE_S)
    table = _report(checks, os.environ.get("SLOGUARD_E2E_REPORT"))
    print(f"\nvariables: {values}\n{table}")
    failed = [c for c in checks if not (c.status == "data" or c.status.startswith("skipped"))]
    assert not failed, table + "\nlogs: " + str(stack["tmp"])


def test_alert_rules_evaluate_cleanly(stack: dict[str, Any]) -> None:
    groups = _http(f"{stack['prom']}/api/v1/rules")["data"]["groups"]
    assert len(groups) >= len(_rule_files())
    broken = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r.get("health") == "err"]
    assert not broken
