"""sd_notify messages reach a real AF_UNIX datagram socket; without NOTIFY_SOCKET nothing is sent."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from sloguard.notify import Notifier


def _recv(s: socket.socket) -> str:
    return s.recv(4096).decode()


def test_messages_reach_the_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(path)
        n = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())})
        assert n.enabled and n.watchdog == 30.0
        n.ready()
        assert _recv(s) == "READY=1\nSTATUS=serving"
        n.reloading()
        msg = _recv(s)
        assert msg.startswith("RELOADING=1\nMONOTONIC_USEC=") and msg.split("=")[-1].isdigit()
        n.ping()
        assert _recv(s) == "WATCHDOG=1"
        n.stopping()
        assert _recv(s) == "STOPPING=1"


def test_abstract_namespace_address() -> None:
    assert Notifier({"NOTIFY_SOCKET": "@sloguard/test"}).address == "\0sloguard/test"


@pytest.mark.parametrize(("env", "watchdog"), [
    ({}, None),
    ({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "abc"}, None),
    ({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}, None),  # meant for another pid
    ({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "1000000"}, 1.0),
])
def test_watchdog_interval(env: dict[str, str], watchdog: float | None) -> None:
    assert Notifier(env).watchdog == watchdog


def test_disabled_and_unreachable_sockets_never_raise(tmp_path: Path) -> None:
    Notifier({}).ready()
    Notifier({"NOTIFY_SOCKET": str(tmp_path / "missing.sock")}).ping()


def test_a_receiver_that_stops_reading_never_blocks_the_sender(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(path)
        n = Notifier({"NOTIFY_SOCKET": path})
        for _ in range(5000):  # far beyond the socket's queue: a blocking send would hang here
            n.ping()
        assert sum("sd_notify failed" in r.getMessage() for r in caplog.records) == 1
        while True:  # drain, then sending works again
            s.setblocking(False)
            try:
                s.recv(4096)
            except BlockingIOError:
                break
        n.ready()
        s.setblocking(True)
        assert _recv(s) == "READY=1\nSTATUS=serving" and not n._failing
