"""Hostile streaming targets: one loopback HTTP/1.1 server, one behaviour per path prefix `/<kind>/v1/...`.

Raw asyncio (not aiohttp.web), so every byte, chunk boundary and close is exactly what each case needs:
- `healthy`: 16 content events 20 ms apart after 30 ms, each carrying the server's send stamp `t`
  (perf_counter_ns, one clock for every process on Linux), then usage and `[DONE]`; keep-alive;
  `brisk`: the same, 10 ms apart after 20 ms (~180 ms, for 400 ms timeouts); `GET /served` answers, per trace
  id of a request's `traceparent`, when the server sent the first event of its healthy answer (perf_counter_ns)
  and wrote its last bytes (wall clock, to set against the probe's wall-clock start);
- `flood`: tiny events, each in its own HTTP chunk, written 64 KiB at a time as fast as the client reads,
  until it goes away (the issue's 210k-event answer); `pings`: the same with SSE comments (`:` lines, which
  no event cap counts); `flood-N` / `pings-N`: N a second, paced every millisecond;
- `redirect`: 302 to the healthy stream on this server, with credentials and an API key in the Location;
- `html`: a 200 text/html page; `garbage`: a 200 application/octet-stream of random bytes;
- `reset`: two events, then a TCP reset; `badchunk`: one event, then an invalid chunk size;
- `clen`: `Content-Length: 10` with a longer body; `slowloris`: one byte every 0.5 s; `silent`: never answers;
- `llamaclose`: a llama.cpp-style answer ending on EOS, then the socket closed despite `Keep-Alive`.
Run as a script it serves on a free port, prints the port, and exits when stdin closes (`running()` does that).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial

TOKENS, GAP_S, FIRST_S = 16, 0.020, 0.030
SSE_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
TINY = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
PING = b":\n\n"
SERVED: dict[str, tuple[int, int]] = {}  # trace id -> its healthy answer's first event sent, last bytes written
TRACE: ContextVar[str] = ContextVar("trace", default="")  # the trace id of the request being answered
Writer = asyncio.StreamWriter
Handler = Callable[[asyncio.StreamReader, Writer, int], Awaitable[bool]]  # True: keep the connection


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def stamped_event(i: int) -> bytes:
    body = {"choices": [{"index": 0, "delta": {"content": f" t{i}"}, "finish_reason": None}],
            "t": time.perf_counter_ns()}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


async def healthy(_r: asyncio.StreamReader, w: Writer, _port: int, first_s: float = FIRST_S,
                  gap_s: float = GAP_S) -> bool:
    w.write(SSE_CHUNKED)
    await asyncio.sleep(first_s)
    first_ns = 0
    for i in range(TOKENS):
        event = stamped_event(i)  # the stamp is taken inside, immediately before the write
        first_ns = first_ns or json.loads(event[6:])["t"]
        w.write(chunk(event))
        await w.drain()
        await asyncio.sleep(gap_s)
    usage = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": TOKENS}}
    w.write(chunk(b"data: " + json.dumps(usage).encode() + b"\n\n") + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await w.drain()
    SERVED[TRACE.get()] = (first_ns, time.time_ns())
    if len(SERVED) > 100_000:
        del SERVED[next(iter(SERVED))]
    return True


async def served(_r: asyncio.StreamReader, w: Writer, _port: int) -> bool:
    body = json.dumps(SERVED).encode()
    w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    return True


async def flood(_r: asyncio.StreamReader, w: Writer, _port: int, event: bytes = TINY, rate: int = 0) -> bool:
    """Write `event` in its own chunk, as fast as the client reads (rate 0) or `rate` a second."""
    w.write(SSE_CHUNKED)
    one = chunk(event)
    if not rate:
        block = one * (65536 // len(one))
        while True:
            w.write(block)
            await w.drain()
    loop = asyncio.get_running_loop()
    start, sent = loop.time(), 0
    while True:
        due = int((loop.time() - start) * rate)
        sent = max(sent, due - rate // 100)  # a client that fell behind gets at most 10 ms of backlog at once
        if due > sent:
            w.write(one * (due - sent))
            sent = due
            await w.drain()
        await asyncio.sleep(0.001)


def paced(kind: str) -> Handler | None:
    """Return the handler of `flood-N` or `pings-N` (N events a second), else None."""
    name, _, rate = kind.partition("-")
    event = {"flood": TINY, "pings": PING}.get(name)
    return partial(flood, event=event, rate=int(rate)) if event is not None and rate.isdigit() else None


async def redirect(_r: asyncio.StreamReader, w: Writer, port: int) -> bool:
    w.write(b"HTTP/1.1 302 Found\r\nLocation: http://user:hunter2@127.0.0.1:%d/healthy/v1/chat/completions"
            b"?api_key=sk-leak\r\nContent-Length: 0\r\n\r\n" % port)
    return True


async def html(_r: asyncio.StreamReader, w: Writer, _port: int) -> bool:
    body = b"<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>"
    w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    return True


async def garbage(_r: asyncio.StreamReader, w: Writer, _port: int) -> bool:
    body = random.Random(1).randbytes(4096)
    w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body))
    return True


async def reset(_r: asyncio.StreamReader, w: Writer, _port: int) -> bool:
    w.write(SSE_CHUNKED + chunk(stamped_event(0)) + chunk(stamped_event(1)))
    await w.drain()
    await asyncio.sleep(0.05)
    sock = w.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
    w.transport.abort()
    return False


async def badchunk(_r: asyncio.StreamReader, w: Writer, _port: int) -> bool:
    w.write(SSE_CHUNKED + chunk(stamped_event(0)))
    await w.drain()
    await asyncio.sleep(0.05)
    w.write(b"zz\r\nnot a chunk\r\n")
    await w.drain()
    await asyncio.sleep(30)  # keep it open: the client must not wait for its timeout
    return False


async def clen(_r: asyncio.StreamReader, w: Writer, _port: int) -> bool:
    w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 10\r\n\r\n" + TINY * 3)
    await w.drain()
    await asyncio.sleep(1)
    return False


async def slowloris(_r: asyncio.StreamReader, w: Writer, _port: int) -> bool:
    w.write(SSE_CHUNKED)
    while True:
        w.write(b"1\r\n:\r\n")
        await w.drain()
        await asyncio.sleep(0.5)


async def silent(_r: asyncio.StreamReader, _w: Writer, _port: int) -> bool:
    await asyncio.sleep(3600)
    return False


async def llamaclose(_r: asyncio.StreamReader, w: Writer, _port: int) -> bool:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nKeep-Alive: timeout=5, max=5\r\n" \
           b"Server: llama.cpp\r\nTransfer-Encoding: chunked\r\n\r\n"
    events = [{"choices": [{"finish_reason": None, "index": 0, "delta": {"role": "assistant", "content": None}}]},
              {"choices": [{"finish_reason": None, "index": 0, "delta": {"content": "Hi"}}]},
              {"choices": [{"finish_reason": "stop", "index": 0, "delta": {}}]},
              {"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 5, "total_tokens": 7}}]
    w.write(head + b"".join(chunk(b"data: " + json.dumps(e).encode() + b"\n\n") for e in events)
            + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await w.drain()
    return False  # closed right after the response, as llama-server does


HANDLERS: dict[str, Handler] = {
    "healthy": healthy, "brisk": partial(healthy, first_s=0.020, gap_s=0.010), "served": served,
    "flood": flood, "pings": partial(flood, event=PING), "redirect": redirect, "html": html, "garbage": garbage,
    "reset": reset, "badchunk": badchunk, "clen": clen, "slowloris": slowloris, "silent": silent,
    "llamaclose": llamaclose,
}


async def _request(reader: asyncio.StreamReader) -> str | None:
    """Read one request; return its first path segment (None at EOF); its trace id goes to TRACE."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.split(b"\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(b":") for h in lines[1:])}
    await reader.readexactly(int(fields.get(b"content-length", b"0")))
    TRACE.set(fields.get(b"traceparent", b"").decode().partition("-")[2].partition("-")[0])
    return lines[0].split(b" ")[1].decode().strip("/").split("/")[0]


async def serve(port: int = 0) -> asyncio.Server:
    """Start the server on 127.0.0.1:`port` (0: a free one)."""
    async def handle(reader: asyncio.StreamReader, writer: Writer) -> None:
        bound = writer.get_extra_info("sockname")[1]
        try:
            while (kind := await _request(reader)) is not None:
                handler = HANDLERS.get(kind) or paced(kind)
                if handler is None:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    continue
                if not await handler(reader, writer, bound):
                    break
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", port)


@contextmanager
def running() -> Iterator[str]:
    """Run this server in its own process until the block ends; yield its base URL."""
    proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}"
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    """Serve until stdin closes; print the bound port first."""
    async def run() -> None:
        server = await serve()
        print(server.sockets[0].getsockname()[1], flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)
        server.close()

    asyncio.run(run())
    os._exit(0)


if __name__ == "__main__":
    main()
