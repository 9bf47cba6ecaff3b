"""The diagnosis on a live llama.cpp `llama-server` (issue 48's "Done when"), judged on the daemon's own evaluations.

2 slots and 8x their load (16 closed-loop streams): the verdict is `capacity` at the queue within two evaluations of
the breach and stays; with the llama-server process watched it is never `serving_cpu_bound` (a CPU engine's CPU is
its model's work); prompts near the slot's context are named `long_prompts`. Evaluations are counted by the
verdicts' own times (`at`); waits are hang guards only. The engine runs in a cgroup weighted over the machine's
other work where the machine allows it (tests/support/llama.weight): an engine starved by a busy shared machine
is `serving_cpu_bound`, rightly, and would hide the fault this test injects.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.llama import LlamaServer, run_llama_server, weight
from support.procs import ROOT, Proc, free_port, http_get, start_daemon, wait_until

pytestmark = pytest.mark.e2e
PATIENCE = 60.0
LOAD = ROOT / "benchmarks" / "incident_load.py"


def _config(server: LlamaServer, port: int, state: Path) -> str:
    return f"""version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
builtin_alerts: false
gpu: {{nvml: "off"}}
diagnose: {{window: 10s}}
host: {{interval: 1s, processes: [{{name: llama, target: llama, cmdline_regex: '--port {server.proc.port}'}}]}}
targets:
  - {{name: llama, engine: auto, metrics_url: "{server.url}/metrics", api_url: "{server.url}", model: {server.model},
     scrape_interval: 1s, scrape_timeout: 900ms}}
probes:
  - {{name: a, target: llama, interval: 2s, timeout: 1900ms, max_tokens: 16, prompts: [{{tokens: 48}}]}}
  - {{name: b, target: llama, interval: 2s, timeout: 1900ms, max_tokens: 16, prompts: [{{tokens: 96}}]}}
slos:
  - {{name: chat, target: llama, error_budget_window: 1h,
     objectives: [{{metric: ttft, percentile: 95, threshold: 250ms}}]}}
"""


def _load(server: LlamaServer, seconds: float, *args: str, at: float = 0.0) -> subprocess.Popen[bytes]:
    """Start the load process now; it begins at `at` (Unix time, 0: at once) and runs `seconds`."""
    return subprocess.Popen([sys.executable, str(LOAD), server.url, server.model, "--duration", str(seconds),
                             "--start-at", str(at), *args], stdout=subprocess.DEVNULL)


def _verdict(daemon: Proc) -> dict[str, Any]:
    status, body = http_get(f"{daemon.url}/api/v1/slos")
    slos = json.loads(body).get("slos") or [] if status == 200 else []
    return (slos[0].get("diagnosis") or {}) if slos else {}


def _watch(daemon: Proc, after_breach: int) -> list[tuple[float, str, str]]:
    """Return (at, stage, cause) of each distinct evaluation (polled 4x an evaluation) until `after_breach`
    evaluations after the first breached one; the guard (PATIENCE) only bounds a hang."""
    out: list[tuple[float, str, str]] = []
    end = time.monotonic() + PATIENCE
    while time.monotonic() < end:
        v = _verdict(daemon)
        if v.get("at") is not None and (not out or v["at"] != out[-1][0]):
            out.append((float(v["at"]), str(v.get("stage")), str(v.get("cause"))))
        breached = [i for i, (_, _, c) in enumerate(out) if c != "none"]
        if breached and len(out) - breached[0] > after_breach:
            return out
        time.sleep(0.25)
    raise AssertionError(f"no breach followed by {after_breach} evaluations: {out}")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LlamaServer, Proc]]:
    tmp = tmp_path_factory.mktemp("llama-diagnosis")
    # the recordings' model (tests/fixtures/incidents): 256 wide, 4 layers, 2,048 tokens a slot, so long prompts cost
    with run_llama_server(tmp, slots=2, n_embd=256, n_layer=4, slot_context=2048) as server:
        weight(server.proc.popen.pid)  # the injected load, not the shared machine's, is what the test judges
        users = _load(server, 600, "--rate", "2", "--prompt", "48", "--max-tokens", "16")
        daemon = start_daemon(tmp, _config(server, free_port(), tmp / "state"))
        try:
            wait_until(lambda: (_verdict(daemon).get("signals") or {}).get("output_tokens_per_second", {})
                       .get("baseline") is not None, PATIENCE, "baselines learned on the healthy server")
            yield server, daemon
        finally:
            daemon.stop()
            users.kill()
            users.wait(10)


def test_overload_by_slots_is_capacity_within_two_evaluations_and_never_serving_cpu(
        rig: tuple[LlamaServer, Proc]) -> None:
    server, daemon = rig
    wait_until(lambda: _verdict(daemon).get("cause") == "none", 2 * PATIENCE, "a healthy SLO before the overload")
    overload = _load(server, 40, "--streams", "16", "--prompt", "48", "--max-tokens", "16")
    try:
        seen = _watch(daemon, 10)
    finally:
        overload.kill()
        overload.wait(30)
    causes = [c for _, _, c in seen]
    print("overload:", [f"{s}/{c}" for _, s, c in seen])  # the live figures (pytest -s)
    assert "serving_cpu_bound" not in causes, seen
    breach = next(i for i, c in enumerate(causes) if c != "none")
    right = next((i for i, c in enumerate(causes) if c == "capacity"), None)
    assert right is not None, seen
    assert right - breach <= 2, seen
    stayed = [c for c in causes[right:] if c != "none"]  # while the SLO stays breached
    assert stayed.count("capacity") >= 0.8 * len(stayed), seen
    assert {s for _, s, c in seen if c == "capacity"} <= {"queue", "decode", "none"}, seen


def test_prompts_near_the_context_are_named_long_prompts(rig: tuple[LlamaServer, Proc]) -> None:
    server, daemon = rig
    wait_until(lambda: _verdict(daemon).get("cause") == "none", 2 * PATIENCE, "a healthy SLO before the prompts")
    long = _load(server, 40, "--rate", "1", "--prompt", "1700", "--max-tokens", "16", "--seed", "3")
    try:
        seen = _watch(daemon, 6)
    finally:
        long.kill()
        long.wait(30)
    print("long prompts:", [f"{s}/{c}" for _, s, c in seen])
    named = [c for _, _, c in seen if c not in ("none", "unknown")]
    assert "long_prompts" in named, seen
