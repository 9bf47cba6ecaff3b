"""Hostile /metrics targets beside a healthy one: each is down with its limit as reason, nothing of it is exported.

The daemon is a real process scraping a real HTTP server (tests/support/hostile.py) every 3 s; the figures
(worst /metrics GET, RSS) are in benchmarks/hostile.py, not asserted here.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from support.hostile import PAGES, HostileServer, daemon_config
from support.procs import Proc, free_port, http_get, metric_value, start_daemon, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HostileServer, Proc]]:
    tmp = tmp_path_factory.mktemp("hostile")
    with HostileServer() as server:
        # Every 3 s: a busy CI machine must not turn the limits under test into timeouts.
        config = daemon_config(server.url, free_port(), str(tmp / "state"), {n: n for n in PAGES}, interval=3.0)
        daemon = start_daemon(tmp, config)
        try:
            yield server, daemon
        finally:
            daemon.stop()


def _metrics(daemon: Proc) -> str:
    status, body = http_get(f"{daemon.url}/metrics", timeout=10)
    assert status == 200
    return body.decode()


def _all_scraped(daemon: Proc) -> bool:
    text = _metrics(daemon)
    return all(metric_value(text, "sloguard_source_failures_total", {"target": name, "reason": reason}) is not None
               for name, (_, reason) in PAGES.items()) and "sloguard_server_requests_running{" in text


@pytest.mark.parametrize("name", sorted(PAGES))
def test_hostile_target_is_down_with_its_limit(hostile: tuple[HostileServer, Proc], name: str) -> None:
    _, daemon = hostile
    wait_until(lambda: _all_scraped(daemon), 120, "every hostile target scraped")
    text = _metrics(daemon)
    reason = PAGES[name][1]
    assert metric_value(text, "sloguard_source_up", {"source": "scrape", "target": name}) == 0.0
    assert (metric_value(text, "sloguard_source_failures_total", {"target": name, "reason": reason}) or 0) >= 1
    # Nothing of a rejected scrape is kept: no server series, no body/sample gauges for it.
    assert f'target="{name}",model=' not in text
    assert metric_value(text, "sloguard_scrape_samples", {"target": name}) is None


def test_healthy_target_beside_them_is_unaffected(hostile: tuple[HostileServer, Proc]) -> None:
    _, daemon = hostile
    wait_until(lambda: _all_scraped(daemon), 120, "every hostile target scraped")
    text = _metrics(daemon)
    assert metric_value(text, "sloguard_source_up", {"source": "scrape", "target": "healthy"}) == 1.0
    assert metric_value(text, "sloguard_server_kv_cache_usage_ratio", {"target": "healthy", "model": "m"}) == 0.25
    assert "lora-" not in text and "model-1" not in text and 'reason="r1' not in text
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    assert series < 2_000, f"{series} series exported"


def test_each_hostile_target_is_logged_with_its_reason_and_no_traceback(
        hostile: tuple[HostileServer, Proc]) -> None:
    server, daemon = hostile
    wait_until(lambda: all(server.hits.get(n, 0) >= 2 for n in PAGES), 120, "two scrapes of every target")
    log = daemon.output()
    assert "Traceback" not in log
    for name, (_, reason) in PAGES.items():
        assert re.search(rf"scrape failed target={name} replica=\S+ reason={reason}\b", log), (name, reason)


def test_parser_process_ends_with_a_killed_daemon(tmp_path: Path) -> None:
    with HostileServer(pages={"big_page": PAGES["big_page"]}) as server:
        config = daemon_config(server.url, free_port(), str(tmp_path / "state"), {"big": "big_page|, sample_limit: 0"},
                               interval=2.0)
        daemon = start_daemon(tmp_path, config)
        try:
            wait_until(lambda: server.hits.get("big_page", 0) >= 1 and len(_children(daemon)) >= 2, 30,
                       "the parser process beside the probe process")
            children = _children(daemon)
            daemon.popen.send_signal(signal.SIGKILL)
            daemon.popen.wait(10)
            wait_until(lambda: not any(_alive(c) for c in children), 10, "every child process to exit")
        finally:
            daemon.stop()


def _children(daemon: Proc) -> list[psutil.Process]:
    return [c for c in psutil.Process(daemon.popen.pid).children(recursive=True) if "spawn_main" in " ".join(
        c.cmdline())]


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
