"""Under systemd's notify protocol the daemon reports READY after the first evaluation, feeds the watchdog,
announces reloads and stopping; checked with a real AF_UNIX datagram socket."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest
from support.procs import free_port, start_daemon, wait_until

pytestmark = pytest.mark.e2e


def test_ready_watchdog_reload_stopping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "notify.sock")
    got: list[str] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(path)
        s.settimeout(0.2)

        def pump() -> None:
            try:
                while True:
                    got.extend(s.recv(4096).decode().splitlines())
            except TimeoutError:
                pass

        monkeypatch.setenv("NOTIFY_SOCKET", path)
        monkeypatch.setenv("WATCHDOG_USEC", "1000000")
        cfg = (f'version: sloguard/v1\nlisten: "127.0.0.1:{free_port()}"\nstate_dir: "{tmp_path}/s"\n'
               "evaluation_interval: 1s\n")
        d = start_daemon(tmp_path, cfg)
        try:
            wait_until(lambda: (pump(), "READY=1" in got)[1], 15, "READY=1")
            wait_until(lambda: (pump(), got.count("WATCHDOG=1") >= 2)[1], 10, "watchdog pings")
            d.popen.send_signal(signal.SIGHUP)
            wait_until(lambda: (pump(), "RELOADING=1" in got)[1], 10, "RELOADING=1")
            assert got.index("READY=1") < got.index("RELOADING=1")
        finally:
            assert d.stop() == 0
        pump()
        assert "STOPPING=1" in got
