"""The listen address: parse it, explain why it cannot be bound in one line, check it before starting."""

from __future__ import annotations

import errno
import re
import socket

# ":9478" (all interfaces), "127.0.0.1:9478", "host.example:9478", "[::1]:9478"
_LISTEN = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):(\d{1,5})$")
_WHY = {
    errno.EADDRINUSE: "address already in use (another sloguard, or another program, listens there)",
    errno.EACCES: "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)",
    errno.EPERM: "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)",
    errno.EADDRNOTAVAIL: "no local interface has this address",
}


class ListenError(Exception):
    """The exporter cannot listen where asked; str() is one line naming the address and the reason."""


def parse_listen(listen: str) -> tuple[str, int]:
    """Split `host:port` (`:9478` means all interfaces, `[::1]:9478` IPv6); raise ListenError when malformed."""
    m = _LISTEN.match(listen.strip())
    if m is None or not 0 <= int(m.group(2)) <= 65535:
        raise ListenError(f"invalid listen address {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:9478 or :9478")
    return m.group(1).strip("[]") or "0.0.0.0", int(m.group(2))


def local_url(listen: str, scheme: str = "http") -> str:
    """Return the URL a client on this host reaches a listen address at (all interfaces: the loopback)."""
    host, port = parse_listen(listen)
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def describe(listen: str, exc: OSError) -> ListenError:
    """Turn a bind failure into a ListenError naming the address, the reason and the setting to change."""
    if isinstance(exc, socket.gaierror):
        why = f"cannot resolve the host ({exc.strerror})"
    else:
        why = _WHY.get(exc.errno or 0) or (exc.strerror or type(exc).__name__).lower()
    return ListenError(f"cannot listen on {listen}: {why}")


def check_listen(listen: str) -> None:
    """Bind and release the address now (what `run` will do); raise ListenError if that fails."""
    host, port = parse_listen(listen)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, addr in infos[:1]:
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds (reuse_address)
                s.bind(addr)
    except OSError as exc:
        raise describe(listen, exc) from None
