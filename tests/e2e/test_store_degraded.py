"""A full or read-only state_dir never blinds sloguard (issue 20, items 1-2): on a real 8 MB tmpfs filled with
dd, a 100 % error fault still pages through the Slack-like server, every failed request counts in the SLO,
`sloguard_store_up` says 0, and the backlog lands in the store once space is freed; a daemon started on a full
or read-only disk serves /metrics, answers ready (degraded) and keeps feeding the systemd watchdog."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest
from support.procs import (
    Proc,
    free_port,
    http_get,
    http_post,
    sim_config,
    simulator,
    start_daemon,
    wait_until,
)
from support.slack_double import BURN_RULE, SlackDouble, slack_notifier
from support.storage import fill, remount, tmpfs

from sloguard.persistence import RETRY_INTERVAL

pytestmark = pytest.mark.e2e
DOWN = "state store cannot be written"


def value(body: str, name: str, labels: dict[str, str] | None = None) -> float:
    """Return the sum of the samples of `name` matching `labels` (0 when there are none)."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(s.value for fam in text_string_to_metric_families(body) for s in fam.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in (labels or {}).items()))


def scrape(d: Proc) -> str:
    return http_get(f"{d.url}/metrics")[1].decode()


def metric(d: Proc, name: str, labels: dict[str, str] | None = None) -> float:
    return value(scrape(d), name, labels)


def counted(body: str) -> tuple[float, float, float]:
    """Return (failed probe requests, requests the SLO's availability budget judged bad, all probe requests)."""
    failed = sum(value(body, "sloguard_probe_requests_total", {"outcome": o}) for o in ("error", "timeout"))
    bad = value(body, "sloguard_slo_requests_total", {"slo": "sim-latency", "sli": "availability", "good": "false"})
    return failed, bad, value(body, "sloguard_probe_requests_total")


def store_tracebacks(log: str) -> list[str]:
    """Return log lines with a traceback from the store (other parts of the daemon have their own tests)."""
    return [line for line in log.splitlines() if "Traceback" in line and any(
        k in line for k in ("sqlite3", "logger=sloguard.store", "sloguard/store.py", "persistence.py", "fallback.py"))]


def rows(db: Path, where: str = "1") -> int:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM probe_results WHERE {where}").fetchone()[0])


def test_disk_full_during_an_error_fault_pages_counts_and_catches_up(tmp_path: Path, slack: SlackDouble) -> None:
    with tmpfs(tmp_path / "mnt") as mnt, simulator(tmp_path) as sim:
        state = mnt / "state"
        text = sim_config(sim, free_port(), state, extra=slack_notifier(slack.api_url) + BURN_RULE)
        daemon = start_daemon(tmp_path, text)
        try:
            # A loaded machine can time out the first probes and fire SLOBurnFast early: start from a calm SLO.
            wait_until(lambda: metric(daemon, "sloguard_slo_requests_total", {"slo": "sim-latency"}) >= 5
                       and metric(daemon, "sloguard_alerts", {"alertname": "SLOBurnFast"}) == 0, 120,
                       "5 judged requests and no SLOBurnFast")
            pages_before = len(slack.posted())
            assert metric(daemon, "sloguard_store_up") == 1
            filler, full_since = fill(mnt), time.monotonic()
            wait_until(lambda: metric(daemon, "sloguard_store_up") == 0, 60, "sloguard_store_up 0 on a full disk")
            status, body = http_get(f"{daemon.url}/-/ready")
            assert status == 200 and b"degraded" in body and b"full" in body  # not killed, not unrouted
            before = counted(scrape(daemon))
            assert http_post(f"{sim.url}/sim/faults", {"error_rate": 1.0})[0] == 200
            wait_until(lambda: len(slack.posted()) > pages_before, 120, "the burn alert in Slack, disk full")
            assert str(slack.posted()[pages_before]["text"]).startswith("PAGE: SLOBurnFast")
            wait_until(lambda: counted(scrape(daemon))[0] >= before[0] + 10, 60, "10 failed requests")
            body_full = scrape(daemon)
            during = counted(body_full)
            failed, judged_bad, total = (now - then for now, then in zip(during, before, strict=True))
            assert total >= judged_bad >= failed > 0, "every failed request counts in the SLO"
            assert value(body_full, "sloguard_store_up") == 0
            assert value(body_full, "sloguard_store_backlog_results") > 0
            assert sum(value(body_full, "sloguard_store_write_errors_total", {"operation": op})
                       for op in ("probe_results", "alert_state", "outbox")) >= 1
            assert filler.exists() and os.statvfs(mnt).f_bavail == 0  # all of the above happened on a full disk
            filler.unlink()
            full_for = time.monotonic() - full_since
            errors = {op: value(body_full, "sloguard_store_write_errors_total", {"operation": op})
                      for op in ("probe_results", "alert_state", "outbox")}
            print(f"\nwrite errors while the disk was full for {full_for:.0f}s: {errors}")
            wait_until(lambda: metric(daemon, "sloguard_store_up") == 1, 30, "the store back once space is freed")
            wait_until(lambda: metric(daemon, "sloguard_store_backlog_results") == 0, 30, "an empty backlog")
            with closing(sqlite3.connect(f"file:{state / 'sloguard.db'}?mode=ro", uri=True)) as conn:
                firing = [d for (d,) in conn.execute("SELECT data FROM alert_active")]
            assert any("SLOBurnFast" in d and '"firing"' in d for d in firing), "the alert state reached the file"
            last = counted(scrape(daemon))
        finally:
            http_post(f"{sim.url}/sim/faults", method="DELETE")
            assert daemon.stop() == 0
        db = state / "sloguard.db"
        assert rows(db) >= last[2], "every counted request is in the store"
        assert rows(db, "ok = 0") >= last[0] >= during[0]
        log = daemon.output()
        # One line per state change, not one per write: at most one "down" per retry interval (RETRY_INTERVAL 5 s),
        # should a nearly full disk take a few writes between failures.
        assert not store_tracebacks(log) and 1 <= log.count(DOWN) <= 1 + full_for / RETRY_INTERVAL
        assert log.count("state store writable again") == log.count(DOWN)


def notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[socket.socket, list[str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", "1000000")
    return sock, []


def pump(sock: socket.socket, got: list[str]) -> list[str]:
    try:
        while True:
            got.extend(sock.recv(4096).decode().splitlines())
    except TimeoutError:
        pass
    return got


@pytest.mark.parametrize("disk", ["full", "read-only"])
def test_start_on_a_full_or_read_only_disk_serves_pings_and_attaches_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disk: str) -> None:
    with tmpfs(tmp_path / "mnt") as mnt, simulator(tmp_path) as sim:
        state = mnt / "state"
        text = sim_config(sim, free_port(), state)
        if disk == "read-only":  # a store from an earlier run, then the filesystem goes read-only
            first = start_daemon(tmp_path, text, name="first.yaml")
            wait_until(lambda: metric(first, "sloguard_probe_requests_total", {"outcome": "success"}) >= 3, 60,
                       "3 stored results")
            assert first.stop() == 0
            earlier = rows(state / "sloguard.db")
            remount(mnt, "ro")
            filler = None
        else:
            earlier, filler = 0, fill(mnt)
        sock, got = notify_socket(tmp_path, monkeypatch)
        with sock:
            daemon = start_daemon(tmp_path, text)
            try:
                wait_until(lambda: "READY=1" in pump(sock, got), 30, "READY=1 on a degraded start")
                pings = got.count("WATCHDOG=1")
                wait_until(lambda: metric(daemon, "sloguard_probe_requests_total", {"outcome": "success"}) >= 3, 60,
                           "probes served while degraded")
                assert pump(sock, got).count("WATCHDOG=1") >= pings + 2, "watchdog pings stopped on a bad disk"
                assert metric(daemon, "sloguard_store_up") == 0
                assert metric(daemon, "sloguard_store_write_errors_total", {"operation": "open"}) >= 1
                status, body = http_get(f"{daemon.url}/-/ready")
                # The reason is the latest attempt's: the OS's at open, SQLite's own once a retry gets further.
                full = (b"No space left on device", b"disk is full")
                reasons = full if disk == "full" else (b"Read-only file system", b"readonly database")
                assert status == 200 and b"degraded" in body and any(r in body for r in reasons), body
                if filler is not None:
                    filler.unlink()
                else:
                    remount(mnt, "rw")
                wait_until(lambda: metric(daemon, "sloguard_store_up") == 1, 30, "the store attached")
                served = metric(daemon, "sloguard_probe_requests_total", {"outcome": "success"})
                pings = pump(sock, got).count("WATCHDOG=1")
                # WATCHDOG_USEC=1 s: pings every 0.5 s while evaluations complete; wait for one rather than sleep
                # a fixed 1.5 s, which a busy CI host can fill without an evaluation finishing
                wait_until(lambda: pump(sock, got).count("WATCHDOG=1") > pings, 5, "a watchdog ping")
            finally:
                if filler is None:
                    remount(mnt, "rw")
                assert daemon.stop() == 0
        assert rows(state / "sloguard.db") >= earlier + served
        log = daemon.output()
        assert not store_tracebacks(log) and "starting degraded" in log and "writable again" in log
