"""`sloguard bench` ends a stage whose worker process goes silent (SIGSTOP: a wedged loop) and says so.

A request-sized stage has no planned duration, so only its deadline (every request at its whole timeout,
sloguard.bench.plan.deadline_s) can end it: the runner stops the stage there, the silent worker is killed
STOP_GRACE_S later, and the run ends with the records that arrived, the stage marked `overrun`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from support.procs import simulator, wait_until
from test_bench_unhappy import _counter

from sloguard.bench.plan import StageSize, deadline_s, orders
from sloguard.bench.pool import STOP_GRACE_S
from sloguard.bench.runner import OVERRUN_GRACE_S, REQUEST_SLACK_S, START_DELAY_S

pytestmark = pytest.mark.e2e
TIMEOUT_S, REQUESTS, STREAMS = 1.0, 8, 2


@pytest.fixture()
def sim(tmp_path: Path) -> Iterator[str]:
    with simulator(tmp_path, seed=3, extra=("--background-rps", "0", "--time-scale", "0.25")) as proc:
        yield proc.url


def _workers(bench: psutil.Process) -> list[psutil.Process]:
    """Return the bench's live worker processes (not the resource tracker; a child exiting as it is read is gone)."""
    out = []
    for c in bench.children():
        try:
            if "spawn_main" in " ".join(c.cmdline()):
                out.append(c)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
    return out


def _gone(proc: psutil.Process) -> bool:
    """Return whether the process is dead: reaped, or a zombie (psutil may say so by raising, as it exits)."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return True


def test_a_silent_worker_ends_its_stage_at_the_deadline_and_is_killed(sim: str, tmp_path: Path) -> None:
    cfg = tmp_path / "sloguard.yaml"
    cfg.write_text(f"""version: sloguard/v1
targets:
  - {{name: sim, engine: vllm, api_url: "{sim}", metrics_url: "{sim}/metrics", model: sim-llama-3-8b}}
probes:
  - {{name: chat, target: sim, api: chat, max_tokens: 64, timeout: {TIMEOUT_S:g}s, prompts: [{{tokens: 64}}]}}
""")
    out = tmp_path / "r.jsonl"
    bench = subprocess.Popen([sys.executable, "-m", "sloguard", "bench", "-c", str(cfg), "--target", "sim", "-o",
                              str(out), "--concurrency", str(STREAMS), "--requests", str(REQUESTS)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: bool(_workers(psutil.Process(bench.pid))), 60, "the worker process", step=0.02)
        (worker,) = _workers(psutil.Process(bench.pid))  # spawned after the preflight request has ended
        wait_until(lambda: _counter(sim, "vllm:num_requests_running") > 0, 60, "the stage's first request",
                   step=0.02)
        os.kill(worker.pid, signal.SIGSTOP)  # a loop that never runs again: no records, no "done", no reply
        stopped = time.monotonic()
        stdout, stderr = bench.communicate(timeout=120)
        took = time.monotonic() - stopped
    finally:
        bench.kill()
    assert bench.returncode == 0, stderr
    size = StageSize(None, REQUESTS)
    bound = START_DELAY_S + deadline_s(orders(0, "concurrency", STREAMS, size, 1, 0, []), size, TIMEOUT_S,
                                       REQUEST_SLACK_S) + OVERRUN_GRACE_S + STOP_GRACE_S
    # + the run's end (results, table, exit) on a loaded CI host; without the kill it never ends at all
    assert took <= bound + 15.0, (took, bound)
    assert "stage overran its plan" in stderr
    assert _gone(worker)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    (stage,) = [r for r in rows if r["type"] == "stage"]
    assert stage["status"] == "overrun" and stage["client"]["workers_died"] == [0]
    assert stage["requests"] < REQUESTS  # what arrived before the wedge is kept; nothing is made up
    assert rows[-1] == {"type": "end", "status": "complete", "stages": 1, "exit_code": 0}
    assert "[overrun]" in stdout + stderr
