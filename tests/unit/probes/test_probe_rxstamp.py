"""Kernel receive stamps: a read is stamped when its bytes reached the host, not when the busy loop got to them."""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import threading
import time
from typing import Any

import pytest

from sloguard.probes import rxstamp
from sloguard.probes.arrival import Arrivals
from sloguard.probes.stream import Stamps, _to_written, fetch, make_session

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux") or rxstamp.SO_TIMESTAMPNS is None,
                                reason="SO_TIMESTAMPNS is Linux's")


def _anc(realtime_ns: int) -> list[tuple[int, int, bytes]]:
    return [(socket.SOL_SOCKET, rxstamp.SO_TIMESTAMPNS or 35, struct.pack("@ll", *divmod(realtime_ns, 10**9)))]


@pytest.mark.parametrize(("age_ns", "expect"), [
    (2_000_000, "converted"),  # 2 ms ago: the same instant on the monotonic clock
    (-5_000_000, "now"),  # in the future (a wall-clock step back): never later than now
    (rxstamp.MAX_AGE_NS + 10**9, "none"),  # older than 10 s: a wall-clock step forward, not an arrival
])
def test_stamp_converts_realtime_to_monotonic(age_ns: int, expect: str) -> None:
    before = time.perf_counter_ns()
    got = rxstamp.stamp_of(_anc(time.time_ns() - age_ns))
    after = time.perf_counter_ns()
    if expect == "none":
        assert got == 0
    elif expect == "now":
        assert before <= got <= after
    else:
        assert before - age_ns - 1_000_000 <= got <= after - age_ns


@pytest.mark.parametrize(("reads", "offset"), [
    # (perf_counter_ns before, time_ns, perf_counter_ns after) per try; the pair nearest in time wins
    ([(1_000, 5_001_000, 1_200)], 5_000_000 - 100),  # tight at once: one try, midpoint 1 100
    ([(1_000, 5_030_000, 31_000), (40_000, 5_040_100, 40_200)], 5_000_000),  # preempted 30 µs, then tight
    ([(1_000, 5_030_000, 31_000), (40_000, 5_040_000, 48_000), (60_000, 5_079_000, 80_000)], 4_996_000),
])
def test_the_clock_offset_comes_from_the_tightest_read(monkeypatch: pytest.MonkeyPatch,
                                                       reads: list[tuple[int, int, int]], offset: int) -> None:
    mono = iter([x for before, _, after in reads for x in (before, after)])
    real = iter([r for _, r, _ in reads])
    monkeypatch.setattr(rxstamp.time, "perf_counter_ns", lambda: next(mono))
    monkeypatch.setattr(rxstamp.time, "time_ns", lambda: next(real))
    got, now = rxstamp.clock_offset()
    assert got == offset and now == reads[-1][2]
    assert next(real, None) is None  # no more tries than needed


def test_no_stamp_without_the_timestamp_message() -> None:
    assert rxstamp.stamp_of([]) == 0
    assert rxstamp.stamp_of([(socket.SOL_SOCKET, 9999, b"\0" * 16)]) == 0
    assert rxstamp.RxClock()() > 0  # outside a stamped read: perf_counter_ns()


def test_unsupported_transports_keep_userspace_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    class NotSelector:
        max_size = 1024

    assert rxstamp.enable(NotSelector()) is None

    async def plain() -> Any:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport, _ = await asyncio.get_running_loop().create_connection(asyncio.Protocol, "127.0.0.1", port)
        monkeypatch.setenv("SLOGUARD_KERNEL_STAMPS", "0")
        off = rxstamp.enable(transport)
        monkeypatch.delenv("SLOGUARD_KERNEL_STAMPS")
        on = rxstamp.enable(transport) if sys.platform.startswith("linux") else "n/a"
        transport.close()
        server.close()
        return off, on

    off, on = asyncio.run(plain())
    assert off is None and on is not None


@pytest.mark.parametrize(("sent", "head", "t0"), [
    (1500, 3000, 1500),  # written after the connection was ready, before the head: t0 is the write
    (500, 3000, 1000),  # the last write was the previous request's (keep-alive): keep the ready stamp
    (3500, 3000, 3000),  # send() returned after the head arrived (loopback): the request was written by the head
    (1500, 0, 1500),  # head not seen by the hook: the write still follows the ready stamp
])
def test_t0_moves_to_the_request_write(sent: int, head: int, t0: int) -> None:
    log, stamps = Arrivals(), Stamps(t0_ns=1000, head_ns=head)
    log.sent_ns = sent
    _to_written(stamps, log)
    assert stamps.t0_ns == t0


def _server(lst: socket.socket, blocking: threading.Event, sent: list[int], woke: threading.Event) -> None:
    """Answer one request: head + event 0 at once, event 1 once the client's loop is blocked, the end once it
    read event 1 (a read holding several segments carries the last one's stamp: keep event 1 alone in its read)."""
    conn, _ = lst.accept()
    with conn:
        conn.recv(65536)
        ev = [b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i for i in range(2)]
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + ev[0])
        blocking.wait(10)
        conn.sendall(ev[1])
        sent.append(time.perf_counter_ns())
        woke.wait(10)
        conn.sendall(b"data: [DONE]\n\n")


@linux_only
def test_stamp_precedes_a_blocked_loop(timestamping_on: None) -> None:
    """Block the loop 50 ms while event 1 arrives: its stamp is when it arrived, not when the loop woke."""
    lst = socket.create_server(("127.0.0.1", 0))
    blocking, woke, sent, unblocked = threading.Event(), threading.Event(), list[int](), list[int]()
    thread = threading.Thread(target=_server, args=(lst, blocking, sent, woke), daemon=True)
    thread.start()
    seen: list[int] = []

    def block() -> None:
        blocking.set()
        time.sleep(0.05)  # the loop can run nothing now: event 1 arrives meanwhile
        unblocked.append(time.perf_counter_ns())

    async def sink(t_ns: int, data: bytes) -> None:
        if not seen:
            asyncio.get_running_loop().call_soon(block)
        seen.append(t_ns)
        if len(seen) == 2:
            woke.set()

    async def main() -> Any:
        async with make_session() as session:
            return await fetch(session, f"http://127.0.0.1:{lst.getsockname()[1]}/v1", {}, {}, 10.0, sink)

    try:
        f = asyncio.run(main())
    finally:
        lst.close()
        thread.join(5)
    assert f.error is None and len(seen) >= 2 and sent and unblocked
    # event 1 was stamped in the kernel while the loop slept: before the loop woke, and it was sent (the stamp
    # is taken on loopback while the sender's write is in the kernel) before `sent` was stamped after it
    assert seen[1] < unblocked[0] - 20_000_000
    assert seen[1] <= sent[0]
    assert f.stamps.t0_ns <= seen[0]
