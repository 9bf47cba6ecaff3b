"""Listen addresses: parsed strictly, and a bind failure is one line naming the address and the reason."""

from __future__ import annotations

import errno
import os
import socket

import pytest

from sloguard.web.listen import ListenError, check_listen, describe, parse_listen


@pytest.mark.parametrize(("text", "want"), [
    (":9478", ("0.0.0.0", 9478)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9478", ("::1", 9478)),
    ("host.example:80", ("host.example", 80)),
])
def test_parse(text: str, want: tuple[str, int]) -> None:
    assert parse_listen(text) == want


@pytest.mark.parametrize("text", ["bogus", "9478", "1.2.3.4:99999", "a b:1", ""])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ListenError, match="invalid listen address"):
        parse_listen(text)


@pytest.mark.parametrize(("code", "why"), [
    (errno.EADDRINUSE, "address already in use"), (errno.EACCES, "permission denied (ports below 1024"),
    (errno.EADDRNOTAVAIL, "no local interface has this address"), (errno.ENETDOWN, "network is down"),
])
def test_describe(code: int, why: str) -> None:
    text = str(describe("127.0.0.1:80", OSError(code, os.strerror(code))))
    assert text.startswith("cannot listen on 127.0.0.1:80: ") and why in text.lower() and "\n" not in text


def test_check_listen_sees_a_busy_port_and_a_free_one() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ListenError, match=f"127.0.0.1:{port}: address already in use"):
            check_listen(f"127.0.0.1:{port}")
    check_listen("127.0.0.1:0")
