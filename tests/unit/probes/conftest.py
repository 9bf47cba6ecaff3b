"""Fixtures shared by the probe tests."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from sloguard.probes import rxstamp


@pytest.fixture
def timestamping_on() -> Iterator[None]:
    """Keep a socket with SO_TIMESTAMPNS open until the kernel stamps reads (Linux turns it on lazily)."""
    lst = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(lst.getsockname())
    b, _ = lst.accept()
    a.setsockopt(socket.SOL_SOCKET, rxstamp.SO_TIMESTAMPNS or 35, 1)
    a.settimeout(2)
    try:
        for _ in range(200):
            b.sendall(b"x")
            _, anc, _, _ = a.recvmsg(16, 64)
            if anc:
                break
            time.sleep(0.01)
        yield
    finally:
        for s in (a, b, lst):
            s.close()
