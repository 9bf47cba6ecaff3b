"""The daemon and the CLI against hostile streaming targets (tests/support/hostile_streams.py), real processes.

One daemon probes a healthy stream beside a tiny-event flood, a 302, an HTML 200, a reset, a malformed chunk
and a llama.cpp-style server that closes every keep-alive connection: each fault has its own outcome and
message, the healthy probe never fails, memory stays bounded, /debug/probes is paginated, and no secret from
the redirect's Location reaches /metrics, /debug or the log. Isolation over time is
tests/e2e/test_flood_isolation.py; its figures (stamps with and without floods) are benchmarks/hostile_streams.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support import hostile_streams
from tests.support.procs import ROOT, free_port, http_get, start_daemon, wait_until

pytestmark = pytest.mark.e2e
KINDS = ("healthy", "flood", "redirect", "html", "reset", "badchunk", "llamaclose")
SECRETS = ("hunter2", "sk-leak")


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    with hostile_streams.running() as base:
        yield base


def _config(port: int, base: str, state: Path) -> str:
    targets = "\n".join(f"  - {{name: {k}, engine: openai, api_url: \"{base}/{k}\", model: m}}" for k in KINDS)
    probes = "\n".join(f"  - {{name: {k}, target: {k}, interval: 1s, timeout: 900ms, max_tokens: 16}}"
                       for k in KINDS)
    return f"""version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
targets:
{targets}
probes:
{probes}
"""


def _outcomes(metrics: str) -> dict[tuple[str, str], float]:
    out = {}
    for line in metrics.splitlines():
        if line.startswith("sloguard_probe_requests_total{"):
            labels = dict(p.split("=", 1) for p in line[line.index("{") + 1 : line.index("}")].split(","))
            out[(labels["probe"].strip('"'), labels["outcome"].strip('"'))] = float(line.rsplit(" ", 1)[1])
    return out


def _rows(url: str) -> list[dict[str, object]]:
    status, body = http_get(url)
    assert status == 200, body
    rows: list[dict[str, object]] = json.loads(body)
    return rows


def test_daemon_beside_hostile_streams(hostile: str, tmp_path: Path) -> None:
    port = free_port()
    proc = start_daemon(tmp_path, _config(port, hostile, tmp_path / "state"))
    try:
        ps = psutil.Process(proc.popen.pid)

        def every_probe_reported(n: int) -> bool:
            got = _outcomes(http_get(f"{proc.url}/metrics")[1].decode())
            return all(sum(v for (p, _), v in got.items() if p == k) >= n for k in KINDS)

        wait_until(lambda: every_probe_reported(2), 60, "two results from every probe")
        rss0 = ps.memory_info().rss
        wait_until(lambda: every_probe_reported(8), 90, "eight results from every probe")
        growth_mib = (ps.memory_info().rss - rss0) / (1 << 20)
        metrics = http_get(f"{proc.url}/metrics")[1].decode()
        got = _outcomes(metrics)
        kinds = {p: {o for (q, o) in got if q == p} for p in KINDS}
        assert kinds == {"healthy": {"success"}, "flood": {"event_flood"}, "redirect": {"redirect"},
                         "html": {"error"}, "reset": {"error"}, "badchunk": {"error"}, "llamaclose": {"success"}}
        assert growth_mib < 30, f"daemon RSS grew {growth_mib:.1f} MiB under a tiny-event flood"
        assert "sloguard_probe_timing_overhead_seconds " in metrics
        assert "sloguard_probe_loop_stall_max_seconds " in metrics

        def last_error(kind: str) -> object:
            (row,) = _rows(f"{proc.url}/debug/probes?probe={kind}&limit=1")
            return row["error"], row["status_code"], row["outcome"]

        assert last_error("redirect") == (
            f"redirect 302 to {hostile}/healthy/v1/chat/completions (query removed)", 302, "redirect")
        assert last_error("html") == ("not an event stream (text/html)", 200, "error")
        assert last_error("badchunk") == ("protocol error: Invalid character in chunk size", 200, "error")
        error, status, _ = last_error("reset")  # type: ignore[misc]
        assert str(error).startswith("connection reset after ") and status == 200
        assert str(last_error("flood")[0]).startswith("event flood: more than 128 events")  # 4 x 16 + 64
        page = _rows(f"{proc.url}/debug/probes?limit=100000")
        assert 0 < len(page) <= 500 and all("itl_counts" not in r for r in page)
        assert http_get(f"{proc.url}/debug/probes?limit=x")[0] == 400
        debug = http_get(f"{proc.url}/debug/probes?limit=500")[1].decode()
    finally:
        proc.stop()
    for text in (metrics, debug, proc.output()):
        assert not any(s in text for s in SECRETS)


def test_probe_once_with_many_probes_against_a_server_closing_each_connection(hostile: str, tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    probes = "\n".join(f"  - {{name: p{i}, target: llama, max_tokens: 8}}" for i in range(12))
    cfg.write_text(f"""version: sloguard/v1
targets: [{{name: llama, engine: openai, api_url: "{hostile}/llamaclose", model: m}}]
probes:
{probes}
""")
    out = subprocess.run([sys.executable, "-m", "sloguard", "probe", "-c", str(cfg), "--once", "--json"],
                         capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert out.returncode == 0, out.stdout + out.stderr
    assert [(r["ok"], r["error"], r["outcome"]) for r in rows] == [(True, None, "success")] * 12
