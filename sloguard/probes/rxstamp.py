"""Kernel receive stamps (SO_TIMESTAMPNS) for probe sockets: arrivals that no event-loop delay can skew.

Why: a stamp taken in `data_received` is late by whatever held the loop when the bytes arrived (another
stream's parsing, a request being built, a GC pause). With 64 streams on one loop that is several ms at p99
(benchmarks/bench_client.py). Linux stamps every received TCP segment in the kernel (a software receive
timestamp, CLOCK_REALTIME); `recvmsg` hands back the stamp of the last segment a read consumed, so a read's
stamp is when its last byte reached this host, however late the loop gets to it.

How (CPython 3.11-3.13 selector event loop): `enable` sets SO_TIMESTAMPNS on a plain TCP transport's socket and
replaces the transport's read callback (`_read_ready_cb`, asyncio's `_read_ready__data_received`) by a copy
that reads with `recvmsg` and publishes the stamp, converted to `perf_counter_ns` (CLOCK_MONOTONIC), while the
protocol's `data_received` runs. The returned `RxClock` answers that stamp inside `data_received` and
`perf_counter_ns()` anywhere else. Every other case keeps the userspace stamp: TLS transports, uvloop, another
OS, a read the kernel did not stamp (timestamping switches on a moment after the first socket asks), a stamp
more than 10 s old (a wall-clock step), or `SLOGUARD_KERNEL_STAMPS=0` in the environment.
"""

from __future__ import annotations

import os
import platform
import socket
import struct
import sys
import time
from typing import Any

# Python's socket module does not name it; 35 is Linux's SO_TIMESTAMPNS(_OLD) on the common architectures (not on
# alpha, mips, parisc or sparc), where it returns a native `struct timespec` (two C longs).
_LINUX_NS = 35 if platform.machine() in ("x86_64", "amd64", "aarch64", "arm64", "i686", "i386", "armv7l",
                                          "ppc64le", "s390x", "riscv64") else None
SO_TIMESTAMPNS: int | None = getattr(socket, "SO_TIMESTAMPNS", _LINUX_NS if sys.platform.startswith("linux") else None)
_TIMESPEC = struct.Struct("@ll")
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
MAX_AGE_NS = 10_000_000_000  # an older stamp means the wall clock stepped between the kernel's stamp and now


class RxClock:
    """Arrival clock of one connection: the kernel's stamp of the read being delivered, else perf_counter_ns()."""

    __slots__ = ("kernel_reads", "pending")

    def __init__(self) -> None:
        self.pending = 0  # the current read's kernel stamp (perf_counter_ns domain); 0 outside a stamped read
        self.kernel_reads = 0

    def __call__(self) -> int:
        return self.pending or time.perf_counter_ns()


TIGHT_NS = 2_000  # a clock pair read within 2 µs is taken at once


def clock_offset(tries: int = 3) -> tuple[int, int]:
    """Return (CLOCK_REALTIME − perf_counter_ns, now on perf_counter_ns) from the tightest of `tries` reads.

    The realtime read sits between two monotonic reads and is paired with their midpoint, so the offset is off
    by at most half their gap: ~100 ns normally, but a busy host can preempt the thread between two reads
    (measured 29 µs at load 20), which a single pair would have moved every stamp by.
    """
    best_gap, offset, after = -1, 0, 0
    for _ in range(tries):
        before = time.perf_counter_ns()
        real = time.time_ns()
        after = time.perf_counter_ns()
        if best_gap < 0 or after - before < best_gap:
            best_gap, offset = after - before, real - (before + after) // 2
        if best_gap <= TIGHT_NS:
            break
    return offset, after


def to_monotonic(realtime_ns: int) -> int:
    """Return a CLOCK_REALTIME stamp on perf_counter_ns's clock; 0 when it is in the future or > 10 s old."""
    offset, now_mono = clock_offset()
    mono = realtime_ns - offset
    if mono > now_mono:  # the clock reads straddle the stamp by ~100 ns: never later than now
        mono = now_mono
    return mono if now_mono - mono <= MAX_AGE_NS else 0


def stamp_of(ancillary: list[tuple[int, int, bytes]]) -> int:
    """Return the SO_TIMESTAMPNS stamp in a recvmsg's ancillary data on perf_counter_ns's clock (0: none)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return to_monotonic(sec * 1_000_000_000 + nsec) if sec else 0
    return 0


def _stamps_on() -> bool:
    """Tell whether this OS gives receive stamps and SLOGUARD_KERNEL_STAMPS does not turn them off."""
    return (SO_TIMESTAMPNS is not None and sys.platform.startswith("linux") and bool(_ANC_SIZE)
            and os.environ.get("SLOGUARD_KERNEL_STAMPS", "1") != "0")


def supported(transport: Any) -> bool:
    """Tell whether `transport` is a plain TCP selector transport whose reads can carry kernel stamps."""
    if not _stamps_on():
        return False
    sock, plain = getattr(transport, "_sock", None), getattr(transport, "_read_ready__data_received", None)
    return (isinstance(sock, socket.socket) and sock.type == socket.SOCK_STREAM and plain is not None
            and getattr(transport, "_read_ready_cb", None) == plain and hasattr(transport, "max_size"))


def enable(transport: Any) -> RxClock | None:
    """Make `transport`'s reads carry kernel receive stamps; return its clock, or None where unsupported."""
    if not supported(transport):
        return None
    sock: socket.socket = transport._sock
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS or 0, 1)
    except OSError:
        return None
    clock = RxClock()
    transport._read_ready_cb = _reader(transport, sock, clock)
    return clock


def enable_listener(sock: Any) -> bool:
    """Stamp what reaches a listening socket's connections before they are accepted; return whether it could.

    Linux stamps a TCP segment on receipt only while some socket asks for stamps, and an accepted socket inherits
    the listener's flag: set after accept, bytes that arrived while the loop was busy carry no stamp at all.
    """
    if not _stamps_on() or SO_TIMESTAMPNS is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def _reader(transport: Any, sock: socket.socket, clock: RxClock) -> Any:
    """Return asyncio's `_read_ready__data_received` with `recvmsg` in place of `recv` (same error handling)."""

    def read_ready() -> None:
        if transport._conn_lost:
            return
        try:
            data, ancillary, _flags, _addr = sock.recvmsg(transport.max_size, _ANC_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            transport._fatal_error(exc, "Fatal read error on socket transport")
            return
        if not data:
            transport._read_ready__on_eof()
            return
        clock.pending = stamp_of(ancillary)
        clock.kernel_reads += clock.pending != 0
        try:
            transport._protocol.data_received(data)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            transport._fatal_error(exc, "Fatal error: protocol.data_received() call failed.")
        finally:
            clock.pending = 0

    return read_ready
