"""The daemon against the simulator, scraped by a real Prometheus: readiness, live data, promtool, reload, SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.exposition import unknown_in_text
from support.procs import (
    Proc,
    free_port,
    http_get,
    http_post,
    metric_value,
    prom_query,
    prometheus,
    sim_config,
    simulator,
    start_daemon,
    wait_until,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("daemon")


@pytest.fixture(scope="module")
def sim(tmp: Path) -> Iterator[Proc]:
    with simulator(tmp) as proc:
        yield proc


@pytest.fixture(scope="module")
def daemon(tmp: Path, sim: Proc) -> Iterator[Proc]:
    port, dead = free_port(), free_port()
    text = sim_config(sim, port, tmp / "state").replace(
        "targets:\n",
        f"targets:\n  - {{name: dead, metrics_url: 'http://127.0.0.1:{dead}/metrics', scrape_interval: 1s, "
        "scrape_timeout: 500ms}\n", 1)
    proc = start_daemon(tmp, text, extra=("--web.enable-lifecycle",))  # the reload tests POST /-/reload
    yield proc
    proc.stop()


def _metrics(d: Proc) -> str:
    status, body = http_get(f"{d.url}/metrics")
    assert status == 200
    return body.decode()


# the scrape's own series: a target also has other sources (identity reads of release reports)
SCRAPE_SIM = {"source": "scrape", "target": "sim"}


def test_ready_after_first_evaluation_and_live_data(daemon: Proc) -> None:
    wait_until(lambda: http_get(f"{daemon.url}/-/ready")[0] == 200, 20, "/-/ready")
    wait_until(lambda: (metric_value(_metrics(daemon), "sloguard_probe_requests_total") or 0) >= 2, 30,
               "probe results in /metrics")
    wait_until(lambda: metric_value(_metrics(daemon), "sloguard_server_ttft_seconds", {"window": "1m"}) is not None,
               30, "server TTFT quantiles from the scrape")
    # up = the latest scrape succeeded; on a busy host one may overrun its 900 ms timeout, and the next succeeds
    wait_until(lambda: metric_value(_metrics(daemon), "sloguard_source_up", SCRAPE_SIM) == 1.0, 20,
               "the scrape up")
    text = _metrics(daemon)
    assert metric_value(text, "sloguard_build_info") == 1.0
    assert metric_value(text, "sloguard_config_last_reload_successful") == 1.0


def test_dead_target_is_down_and_nothing_else_is(daemon: Proc) -> None:
    wait_until(lambda: metric_value(_metrics(daemon), "sloguard_source_up", {"target": "dead"}) == 0.0, 20,
               "the dead target reported down")
    text = _metrics(daemon)
    assert metric_value(text, "sloguard_source_failures_total", {"target": "dead", "reason": "connect"}) is not None
    # nothing else is down for it (a busy host's overrun scrape is up again at the next one)
    wait_until(lambda: metric_value(_metrics(daemon), "sloguard_source_up", SCRAPE_SIM) == 1.0, 20, "sim up")


def test_garbage_metrics_from_the_target_is_reported_not_fatal(daemon: Proc, sim: Proc) -> None:
    assert http_post(f"{sim.url}/sim/faults", {"garbage_metrics": True})[0] in (200, 204)
    try:
        wait_until(lambda: metric_value(_metrics(daemon), "sloguard_source_up", SCRAPE_SIM) == 0.0, 20,
                   "garbage /metrics reported as down")
        assert http_get(f"{daemon.url}/-/healthy")[0] == 200
    finally:
        http_post(f"{sim.url}/sim/faults", method="DELETE")
    wait_until(lambda: metric_value(_metrics(daemon), "sloguard_source_up", SCRAPE_SIM) == 1.0, 20,
               "recovery after the fault is removed")


def test_exposition_passes_promtool(daemon: Proc) -> None:
    wait_until(lambda: "sloguard_slo_" in _metrics(daemon), 30, "SLO series")
    out = subprocess.run(["promtool", "check", "metrics"], input=_metrics(daemon).encode(), capture_output=True,
                         check=False)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    assert out.stdout.decode().strip() == "", out.stdout.decode()
    assert unknown_in_text(_metrics(daemon)) == []  # `sloguard check` knows every name and label exported


def test_api_and_debug_endpoints_are_json(daemon: Proc) -> None:
    for path in ("/api/v1/slos", "/debug/probes", "/debug/alerts"):
        status, body = http_get(f"{daemon.url}{path}")
        assert status == 200, path
        json.loads(body)
    status, body = http_get(f"{daemon.url}/")
    assert status == 200 and b"/metrics" in body


def test_reload_keeps_old_config_on_error_then_recovers(daemon: Proc, tmp: Path) -> None:
    cfg = tmp / "sloguard.yaml"
    good = cfg.read_text()
    cfg.write_text(good.replace("threshold: 500ms", "threshold: 0s", 1))
    daemon.popen.send_signal(signal.SIGHUP)
    wait_until(lambda: metric_value(_metrics(daemon), "sloguard_config_last_reload_successful") == 0.0, 10,
               "reload gauge 0 after a bad file")
    assert http_get(f"{daemon.url}/-/healthy")[0] == 200
    assert metric_value(_metrics(daemon), "sloguard_source_up", {"target": "sim"}) == 1.0
    assert "slos[0].objectives[0].threshold: must be > 0" in daemon.output()
    assert http_post(f"{daemon.url}/-/reload")[0] == 500
    cfg.write_text(good)
    daemon.popen.send_signal(signal.SIGHUP)
    wait_until(lambda: metric_value(_metrics(daemon), "sloguard_config_last_reload_successful") == 1.0, 10,
               "reload gauge back to 1")
    assert http_post(f"{daemon.url}/-/reload")[0] == 200


def test_reload_of_an_undecodable_file_is_one_line_and_keeps_the_config(daemon: Proc, tmp: Path) -> None:
    cfg = tmp / "sloguard.yaml"
    good = cfg.read_bytes()
    for bad, problem in ((b"version: sloguard/v1\nlisten: \xff\n", "not UTF-8 text (byte 0xff at offset 29)"),
                         (b"\x7fELF\x02\x01\x00\x00", "binary file (NUL byte at offset 6)")):
        cfg.write_bytes(bad)
        assert http_post(f"{daemon.url}/-/reload")[0] == 500
        assert metric_value(_metrics(daemon), "sloguard_config_last_reload_successful") == 0.0
        assert f"{cfg}: {problem}" in daemon.output()
        assert "Traceback" not in daemon.output()
        assert metric_value(_metrics(daemon), "sloguard_source_up", {"target": "sim"}) == 1.0
    cfg.write_bytes(good)
    assert http_post(f"{daemon.url}/-/reload")[0] == 200


def test_real_prometheus_scrapes_the_daemon(daemon: Proc, tmp: Path) -> None:
    with prometheus(tmp, daemon.port) as prom:
        wait_until(lambda: bool(prom_query(prom, 'up{job="sloguard"} == 1')), 30, "Prometheus target up")
        for q in ('sloguard_source_up{target="sim"}', "sloguard_probe_requests_total", "sloguard_build_info",
                  "sloguard_probe_ttft_seconds_bucket", "sloguard_slo_requests_total"):
            wait_until(lambda q=q: bool(prom_query(prom, q)), 20, f"{q} in Prometheus")


def test_sigterm_exits_zero_before_systemd_would_kill(tmp: Path, sim: Proc) -> None:
    sub = tmp / "term"
    sub.mkdir()
    proc = start_daemon(sub, sim_config(sim, free_port(), sub / "state"))
    wait_until(lambda: http_get(f"{proc.url}/-/ready")[0] == 200, 20, "/-/ready")
    start = time.monotonic()
    proc.popen.send_signal(signal.SIGTERM)
    # The contract is the unit's TimeoutStopSec=20s (SIGKILL after); the daemon's own waits add up to well under
    # 10 s on an idle host (probe process 4 s, alert delivery 2 s), which a busy CI host must not turn into a fail.
    code = proc.popen.wait(timeout=20)
    assert code == 0, proc.output()
    assert time.monotonic() - start < 20


def test_a_killed_probe_process_is_restarted(daemon: Proc) -> None:
    import psutil

    workers = [c for c in psutil.Process(daemon.popen.pid).children() if "spawn_main" in " ".join(c.cmdline())]
    assert len(workers) == 1, [c.cmdline() for c in psutil.Process(daemon.popen.pid).children()]
    before = metric_value(_metrics(daemon), "sloguard_probe_requests_total") or 0.0
    workers[0].kill()
    wait_until(lambda: metric_value(_metrics(daemon), "sloguard_probe_worker_restarts_total") == 1.0, 20,
               "the probe process restarted")
    wait_until(lambda: (metric_value(_metrics(daemon), "sloguard_probe_requests_total") or 0.0) > before, 20,
               "probe results again after the restart")
    assert metric_value(_metrics(daemon), "sloguard_probe_worker_up") == 1.0


def test_daemon_process_never_loads_torch(daemon: Proc) -> None:
    maps = Path(f"/proc/{daemon.popen.pid}/maps").read_text()
    assert "torch" not in maps, "torch must run only in the canary subprocess"
