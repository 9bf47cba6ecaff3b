"""A real daemon beside a hostile engine (tests/support/hostile_engine.py): token counts of 2^63, -9,999,464 and
NaN, 1,000,000 models, a 16 MB model name, escape bytes in names and versions, then a YAML alias bomb by SIGHUP.

While attacked: the healthy probe's SLO keeps counting every request (nothing freezes evaluation), the store stays
up, memory stays bounded (RSS), every `/metrics` GET answers within 250 ms of an interleaved GET of the machine's
own baseline (`/ping` on the engine's thread), no peer byte reaches the log or /metrics raw, and the daemon exits
0 on SIGTERM. Figures of the same attacks: benchmarks/hostile_engine.py.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from support.hostile_engine import KINDS, HostileEngine
from support.procs import ROOT, Proc, free_port, http_get, metric_value, start_daemon, wait_until

pytestmark = pytest.mark.e2e
GET_BOUND_S = 0.250
RSS_GROWTH_MIB = 64  # over the attack window, the main and the probe process together
LOL = '["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'


def alias_bomb() -> str:
    lines = ["version: sloguard/v1", f"a: &a {LOL}"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join([*lines, "log: {format: *i}"]) + "\n"  # a key pydantic validates, quoting its input


def config(port: int, engine: HostileEngine, state: Path) -> str:
    targets = "\n".join(f'  - {{name: {k}, engine: vllm, api_url: "{engine.url(k)}", model: m}}' for k in KINDS)
    probes = "\n".join(f"  - {{name: {k}, target: {k}, interval: 1s, timeout: 900ms, max_tokens: 16}}" for k in KINDS)
    return f"""version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
gpu: {{nvml: "off"}}
reports: {{identity_interval: 1s}}
targets:
{targets}
probes:
{probes}
slos:
  - {{name: ux, target: healthy, probe: healthy, objectives: [{{metric: ttft, percentile: 95, threshold: 5s}}],
     goodput: {{ttft: 5s, target: 0.9}}, error_budget_window: 1d}}
"""


@dataclass
class Window:
    """What a stretch of the attack measured: per /metrics GET the time the daemon can be blamed for, RSS."""

    blamed_s: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)

    @property
    def worst_ms(self) -> float:
        return max(self.blamed_s) * 1e3


def _rss(pid: int) -> float:
    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


def _timed(url: str) -> tuple[float, bytes]:
    start = time.perf_counter()
    status, body = http_get(url, timeout=30)
    assert status == 200
    return time.perf_counter() - start, body


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def watch(daemon: Proc, engine: HostileEngine, seconds: float) -> Window:
    """GET /metrics every 0.25 s for `seconds`. A GET's time is blamed on the daemon up to what it did meanwhile:
    the wall time over an interleaved /ping of the engine (the machine's own delay), and at most the CPU time the
    daemon's main process burnt during it (a loop blocked by parsing burns CPU; one waiting for a loaded
    machine's cores does not), so a busy CI runner does not fail a healthy daemon, and a blocked loop fails."""
    w, main = Window(), psutil.Process(daemon.popen.pid)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ping, _ = _timed(f"http://127.0.0.1:{engine.port}/ping")
        cpu = _cpu(main)
        took, body = _timed(f"{daemon.url}/metrics")
        w.blamed_s.append(min(took - ping, _cpu(main) - cpu))
        w.rss_mib.append(_rss(daemon.popen.pid))
        w.metrics.append(body.decode())
        time.sleep(0.25)
    return w


def value(text: str, name: str, **labels: str) -> float:
    return metric_value(text, name, labels) or 0.0


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, HostileEngine, Window]]:
    tmp = tmp_path_factory.mktemp("hostile-engine")
    with HostileEngine() as engine:
        daemon = start_daemon(tmp, config(free_port(), engine, tmp / "state"))
        try:
            wait_until(lambda: all(engine.hits.get(f"{k}/models", 0) >= 1 for k in KINDS)
                       and value(http_get(f"{daemon.url}/metrics")[1].decode(), "sloguard_slo_requests_total",
                                 slo="ux", good="true") >= 3, 60, "every attack delivered once")
            yield daemon, engine, watch(daemon, engine, 8.0)
        finally:
            assert daemon.stop() == 0, daemon.output()[-3000:]


def test_token_counts_out_of_range_invalidate_one_result_and_freeze_nothing(attacked: tuple[Proc, HostileEngine,
                                                                                             Window]) -> None:
    daemon, _, w = attacked
    first, last = w.metrics[0], w.metrics[-1]
    assert value(last, "sloguard_store_up") == 1.0
    assert value(last, "sloguard_invalid_input_total", source="probe", reason="out_of_range") >= 2
    assert value(last, "sloguard_invalid_input_total", source="probe", reason="not_finite") >= 1
    for kind in ("huge_tokens", "negative_tokens", "nan_tokens"):
        assert value(last, "sloguard_probe_requests_total", probe=kind, target=kind, outcome="error") >= 1
        assert value(last, "sloguard_probe_requests_total", probe=kind, target=kind, outcome="success") == 0
    tokens = [float(line.rsplit(" ", 1)[1]) for line in last.splitlines()
              if line.startswith("sloguard_probe_output_tokens_total")]
    assert tokens and all(0 <= t < 1e9 for t in tokens)  # never negative, NaN or 2^63
    def counted(text: str) -> float:
        return value(text, "sloguard_slo_requests_total", slo="ux", good="true")

    def probed(text: str) -> float:
        return value(text, "sloguard_probe_requests_total", probe="healthy", target="healthy", outcome="success")

    # judged against the daemon's own count of the healthy probe's requests in the window, not a wall-clock guess
    assert probed(last) - probed(first) >= 1
    assert counted(last) - counted(first) >= probed(last) - probed(first) - 2, "the SLO stopped counting"
    assert value(last, "sloguard_probe_requests_total", probe="healthy", target="healthy", outcome="error") == 0
    assert "periodic step failed" not in daemon.output()


def test_answers_beyond_the_limits_cost_no_memory_and_no_latency(attacked: tuple[Proc, HostileEngine,
                                                                                Window]) -> None:
    _, _, w = attacked
    last = w.metrics[-1]
    assert value(last, "sloguard_invalid_input_total", source="identity", reason="too_large") >= 2
    assert max(len(line) for line in last.splitlines()) < 4096  # no 16 MB label, no million-model label
    assert w.worst_ms <= GET_BOUND_S * 1e3, f"worst /metrics GET: {w.worst_ms:.0f} ms blamed on the daemon"
    assert max(w.rss_mib) - w.rss_mib[0] <= RSS_GROWTH_MIB, w.rss_mib


def test_no_peer_control_byte_reaches_the_log_or_metrics(attacked: tuple[Proc, HostileEngine, Window]) -> None:
    daemon, _, w = attacked
    for text in (daemon.output(), w.metrics[-1]):
        bad = {c for c in text if unicodedata.category(c) in ("Cc", "Zl", "Zp") and c != "\n"}
        assert not bad, sorted(map(hex, map(ord, bad)))


def test_an_alias_bomb_by_sighup_keeps_the_running_config(attacked: tuple[Proc, HostileEngine, Window]) -> None:
    daemon, engine, _ = attacked
    cfg = daemon.log.parent / "sloguard.yaml"
    good = cfg.read_text()
    before = value(http_get(f"{daemon.url}/metrics")[1].decode(), "sloguard_slo_requests_total", slo="ux",
                   good="true")
    cfg.write_text(alias_bomb())
    try:
        daemon.popen.send_signal(signal.SIGHUP)
        w = watch(daemon, engine, 4.0)
    finally:
        cfg.write_text(good)
    assert value(w.metrics[-1], "sloguard_config_last_reload_successful") == 0.0
    assert w.worst_ms <= GET_BOUND_S * 1e3, f"worst /metrics GET: {w.worst_ms:.0f} ms blamed on the daemon"
    assert max(w.rss_mib) - w.rss_mib[0] <= RSS_GROWTH_MIB, w.rss_mib
    assert value(w.metrics[-1], "sloguard_slo_requests_total", slo="ux", good="true") > before  # old config runs


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # the old loader took 4.2 GB before failing


def test_check_refuses_an_alias_bomb_at_once(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    done = subprocess.run([sys.executable, "-m", "sloguard", "check", "-c", str(bomb)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, preexec_fn=_limit_memory)
    assert done.returncode == 2, done.stderr[-500:]
    problem = "not valid YAML: its aliases would add more than 100000 nodes (an alias bomb?)"
    assert done.stderr.strip() == f"{bomb}: {problem}"
