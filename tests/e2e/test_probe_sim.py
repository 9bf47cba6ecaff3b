"""Probes against the simulator in a real process: the CLI's TTFT matches the simulator's, the probe process runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sloguard.probes.job import ProbeJob
from sloguard.probes.worker import ProbeWorker

pytestmark = pytest.mark.e2e
SEED = 7
MODEL = "sim-llama-3-8b"
# Slowed 20x, a decode step lasts 250 ms: the probe's first token must come before the server's second one, with
# room for a busy host's scheduling lag. The sub-millisecond accuracy is measured by benchmarks/probe_timing.py.
TIME_SCALE = 20


@pytest.fixture()
def sim(request: pytest.FixtureRequest) -> Iterator[str]:
    scale = getattr(request, "param", 1)
    proc = subprocess.Popen([sys.executable, "-m", "sloguard", "sim", "--listen", "127.0.0.1:0", "--seed",
                             str(SEED), "--background-rps", "0", "--time-scale", str(scale)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on "), line
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(10)


def http(url: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.parametrize("sim", [TIME_SCALE], indirect=True)
def test_probe_once_ttft_matches_simulator_first_token(sim: str, tmp_path: Path) -> None:
    http(f"{sim}/sim/faults", {"stall_first_token_s": 0.4})
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"""version: sloguard/v1
targets: [{{name: sim, engine: vllm, api_url: "{sim}", model: {MODEL}}}]
probes: [{{name: chat, target: sim, api: chat, max_tokens: 4, prompts: [{{tokens: 64}}]}}]
""")
    out = subprocess.run([sys.executable, "-m", "sloguard", "probe", "-c", str(cfg), "--once", "--json"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    (row,) = [json.loads(line) for line in out.stdout.splitlines()]
    server = http(f"{sim}/sim/requests/chatcmpl-sim{SEED}-00000001")  # the first client request
    assert row["ok"] is True and row["ttft_s"] > 0.4
    assert server["stall_s"] == 0.4
    profile = http(f"{sim}/sim/profile")["profile"]
    decode_step = profile["decode_base_s"] + profile["decode_per_seq_s"]
    # The probe sends before the server receives and reads after the server stamps; less than half a decode
    # step later, so the first token is the one measured (not the role chunk, not the second token).
    assert server["first_token_s"] - 1e-3 <= row["ttft_s"] < server["first_token_s"] + decode_step / 2, (
        row["ttft_s"], server["first_token_s"], decode_step)
    assert row["output_tokens"] == server["output_tokens"]
    assert row["prompt_tokens"] == server["prompt_tokens"]
    assert "itl_counts" not in row and len(row["trace_id"]) == 32


def _drain_until(worker: ProbeWorker, want: int, deadline_s: float) -> list[Any]:
    got: list[Any] = []
    end = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < end:
        time.sleep(0.1)
        got.extend(worker.drain())
    return got


def test_probe_process_runs_updates_and_stops(sim: str) -> None:
    jobs = [ProbeJob(name=n, target="sim", api=api, url=sim, model=MODEL, max_tokens=4, interval=0.3,
                     timeout=5) for n, api in (("a", "chat"), ("b", "completions"))]
    worker = ProbeWorker(jobs)
    worker.start()
    try:
        first = _drain_until(worker, 6, 30)
        drained = time.time()
        assert {r.probe for r in first} == {"a", "b"}
        assert all(r.ok for r in first), [r.error for r in first]
        started = worker.take_started()  # the diagnosis takes these out of the users' arrivals
        assert {t for t, _ in started} == {"sim"} and len(started) >= len(first)
        # each result's start was reported first: in start order, every result has its own, no later than it
        # (how much earlier is the probe loop's lateness in starting the request, a busy host's to decide)
        unused = sorted(ts for _, ts in started)
        for r in sorted(first, key=lambda r: r.ts):
            mine = [ts for ts in unused if ts <= r.ts]
            assert mine, (r.ts, unused)
            unused.remove(mine[-1])
        # each first token as it came (the diagnosis counts the probe's prefill before its result is back): after
        # the token arrived, before the result was read back here
        live = {key: (target, ts, tokens) for target, key, ts, tokens in worker.take_prefilled()}
        for r in first:
            target, ts, tokens = live[r.trace_id]
            assert (target, tokens) == ("sim", 64) and r.ttft_s is not None
            assert r.ts + r.ttft_s <= ts <= drained, (r, ts, drained)
        worker.update(jobs[:1])
        _drain_until(worker, 2, 10)  # requests in flight at the update may still report
        later = _drain_until(worker, 4, 30)
        assert {r.probe for r in later} == {"a"}
        assert worker.overhead_seconds > 0
        assert worker.alive()
    finally:
        worker.stop()
    assert not worker.alive()


def _sim_finished(sim: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{sim}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {s.labels["finished_reason"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "vllm:request_success_total"}


def test_sigterm_to_the_probe_process_finishes_in_flight_requests_and_loses_no_result(sim: str) -> None:
    import os
    import signal
    import time

    http(f"{sim}/sim/faults", {"stall_first_token_s": 0.25})
    job = ProbeJob(name="a", target="sim", api="chat", url=sim, model=MODEL, max_tokens=4, interval=0.3, timeout=2)
    worker = ProbeWorker([job])
    worker.start()
    got = _drain_until(worker, 3, 30)
    os.kill(worker._proc.pid, signal.SIGTERM)  # what a group-wide SIGTERM (systemctl stop) delivers
    worker._proc.join(10)
    assert worker._proc.exitcode == 0, "the probe process must exit cleanly on SIGTERM"
    worker.stop()
    got += worker.drain()
    time.sleep(0.2)
    finished = _sim_finished(sim)
    assert finished.get("abort", 0) == 0, "an in-flight request was cut off"
    assert sum(finished.values()) == len(got), (finished, len(got))
