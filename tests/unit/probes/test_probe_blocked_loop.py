"""Deadlines judged on arrival: an answer that arrived in time is not a timeout because the probe's loop was busy.

A server thread answers while the probe's event loop is blocked (a synchronous sleep in a callback on that loop,
scheduled by the server once the request reached it, so the answer always arrives during the block) far past the
request's deadline. The kernel's arrival stamps decide: the whole answer in time is a success, its last byte after
the deadline a timeout, whichever the loop saw first when it woke.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from dataclasses import dataclass, field

import pytest

from sloguard.model import ProbeResult
from sloguard.outcome import outcome
from sloguard.probes import PROBES, rxstamp
from sloguard.probes.job import ProbeJob
from sloguard.probes.stream import make_session
from sloguard.probes.workload import Prompt

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux") or rxstamp.SO_TIMESTAMPNS is None,
                                reason="arrival stamps taken while the loop is blocked need SO_TIMESTAMPNS (Linux)")
TIMEOUT_S = 0.3
BLOCK_S = 1.0  # the loop sleeps this long, from when the request reached the server: far past the deadline
LATE_S = 0.5  # the late answer's tail is sent this long after the request arrived: after the deadline, mid-block
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENTS = [b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":null}]}\n\n',
          b'data: {"choices":[{"delta":{"content":"b"},"finish_reason":"stop"}]}\n\n',
          b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\n\ndata: [DONE]\n\n']


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@dataclass
class Truth:
    """What the server thread and the blocking callback measured (perf_counter_ns)."""

    received_ns: int = 0
    sent_ns: list[int] = field(default_factory=list)  # after each write
    woke_ns: int = 0  # when the blocked loop could run again


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
    while len(body) < length:
        body += conn.recv(65536)


def _serve(lst: socket.socket, loop: asyncio.AbstractEventLoop, late: bool, truth: Truth) -> None:
    """Answer one request while the client's loop is blocked; with `late`, the last bytes after the deadline."""
    blocking = threading.Event()

    def block() -> None:
        blocking.set()
        time.sleep(BLOCK_S)  # the probe loop runs nothing now: no read, no timer, no task
        truth.woke_ns = time.perf_counter_ns()

    conn, _ = lst.accept()
    with conn:
        _read_request(conn)
        truth.received_ns = time.perf_counter_ns()
        loop.call_soon_threadsafe(block)
        blocking.wait(10)
        first, rest = HEAD + chunk(EVENTS[0]), b"".join(chunk(e) for e in EVENTS[1:]) + b"0\r\n\r\n"
        conn.sendall(first if late else first + rest)
        truth.sent_ns.append(time.perf_counter_ns())
        if late:
            time.sleep(max(0.0, (truth.received_ns + LATE_S * 1e9 - time.perf_counter_ns()) * 1e-9))
            conn.sendall(rest)
            truth.sent_ns.append(time.perf_counter_ns())
        conn.settimeout(10)
        while conn.recv(65536):  # until the client closes or pools the connection and goes away
            pass


def _probe_blocked(late: bool) -> tuple[ProbeResult, Truth, int]:
    lst = socket.create_server(("127.0.0.1", 0))
    truth = Truth()

    async def main() -> tuple[ProbeResult, int]:
        thread = threading.Thread(target=_serve, args=(lst, asyncio.get_running_loop(), late, truth), daemon=True)
        thread.start()
        job = ProbeJob(name="p", target="t", api="chat", url=f"http://127.0.0.1:{lst.getsockname()[1]}",
                       model="m", timeout=TIMEOUT_S)
        async with make_session() as session:
            before = time.perf_counter_ns()  # the request's deadline is at least TIMEOUT_S after this
            return await PROBES["chat"](session, job, Prompt("hello", 64, "short")), before

    try:
        r, before = asyncio.run(main())
    finally:
        lst.close()
    return r, truth, before


@linux_only
def test_an_answer_that_arrived_before_the_deadline_is_not_a_timeout(timestamping_on: None) -> None:
    r, truth, before = _probe_blocked(late=False)
    deadline_no_earlier = before + int(TIMEOUT_S * 1e9)
    # measured truth: the whole answer was sent before the deadline, and the loop woke long after it
    assert truth.sent_ns and truth.sent_ns[-1] < deadline_no_earlier < truth.woke_ns, truth
    assert (r.ok, r.error, outcome(r)) == (True, None, "success")
    assert r.ttft_s is not None and r.e2e_s is not None and r.output_tokens == 2
    # the timings are the kernel's arrival stamps, taken while the loop slept: not when it woke
    assert truth.received_ns <= r.t0_ns + r.e2e_s * 1e9 <= truth.sent_ns[-1] < truth.woke_ns


@linux_only
def test_an_answer_whose_last_bytes_arrived_after_the_deadline_is_a_timeout(timestamping_on: None) -> None:
    r, truth, before = _probe_blocked(late=True)
    # measured truth: the tail was sent after any deadline this request had, while the loop was still blocked,
    # so all of the answer was waiting when the loop woke: only its arrival stamps make it late
    assert len(truth.sent_ns) == 2 and before + TIMEOUT_S * 1e9 < truth.sent_ns[1] < truth.woke_ns, truth
    assert (r.ok, r.error, outcome(r)) == (False, f"timeout after {TIMEOUT_S:g}s", "timeout")
