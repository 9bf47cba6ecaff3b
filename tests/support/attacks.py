"""Hostile peers of the web listener and the OTLP receiver, and a watch of the daemon while they attack.

Shared by tests/e2e/test_hostile_peers.py (bounded, CI-sized) and benchmarks/hostile_peers.py (the figures of
docs/security.md, before and after). Every attack runs for a given number of seconds from threads of this
process against 127.0.0.1 only, and returns what it got back ({status or error name: count}).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import gzip
import hashlib
import http.client
import os
import re
import socket
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import psutil
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PROTOBUF = {"Content-Type": "application/x-protobuf"}
_EVAL = re.compile(rb"^sloguard_evaluation_duration_seconds (\S+)$", re.M)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@dataclass
class Watch:
    """GET /metrics every 50 ms and sample the daemon's RSS (its children included) every 100 ms."""

    url: str
    pid: int
    headers: dict[str, str] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    rss: list[int] = field(default_factory=list)
    evaluations: list[float] = field(default_factory=list)  # the daemon's own sloguard_evaluation_duration_seconds

    def _get(self, stop: threading.Event) -> None:
        with contextlib.suppress(OSError):  # as favour(): measure the daemon, not the runner's queue for a core
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -10)
        parts = urlsplit(self.url)
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
                conn.request("GET", "/metrics", headers=self.headers)
                resp = conn.getresponse()
                body = resp.read()
                conn.close()
                if resp.status != 200:
                    self.failures += 1
            except OSError:
                self.failures += 1
                body = b""
            self.latencies.append(time.perf_counter() - t0)
            m = _EVAL.search(body)
            if m:
                self.evaluations.append(float(m.group(1)))
            stop.wait(0.05)

    def _sample(self, stop: threading.Event) -> None:
        proc = psutil.Process(self.pid)
        while not stop.is_set():
            with contextlib.suppress(psutil.Error):
                self.rss.append(rss_tree(proc))
            stop.wait(0.1)

    @contextlib.contextmanager
    def running(self) -> Iterator[Watch]:
        stop = threading.Event()
        threads = [threading.Thread(target=f, args=(stop,), daemon=True) for f in (self._get, self._sample)]
        for t in threads:
            t.start()
        try:
            yield self
        finally:
            stop.set()
            for t in threads:
                t.join(35)

    @property
    def worst(self) -> float:
        return max(self.latencies, default=0.0)

    @property
    def longest_evaluation(self) -> float:
        return max(self.evaluations, default=0.0)


def rss_tree(proc: psutil.Process) -> int:
    """Return the RSS of a process and all its children, in bytes."""
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += child.memory_info().rss
    return total


def _threads(n: int, seconds: float, one: Callable[[Counter[str]], None]) -> Counter[str]:
    got: Counter[str] = Counter()
    deadline = time.monotonic() + seconds

    def loop() -> None:
        while time.monotonic() < deadline:
            try:
                one(got)
            except OSError as exc:
                got[type(exc).__name__] += 1

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    return got


def post(url: str, body: bytes, headers: dict[str, str], got: Counter[str], path: str = "/v1/traces") -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        got[str(resp.status)] += 1
    finally:
        conn.close()


_ZEROS_CRC = {256 << 20: 0x2A0E7DBB, 1 << 30: 0x5B64C2B0}  # CRC-32 of that many zero bytes (2 s to compute)


@functools.lru_cache(maxsize=4)
def gzip_bomb(inflated: int = 1 << 30) -> bytes:
    """Return one gzip member of `inflated` (a multiple of 1 MiB) zero bytes: 1 GiB in ~1 MiB, built in ~0.5 s.

    After a full flush a deflate stream does not refer back, so every later MiB of zeros compresses to the same
    bytes: compress two, repeat the second, and write the trailer (CRC-32 and size) of the whole.
    """
    mib, z = b"\0" * (1 << 20), zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    first = z.compress(mib) + z.flush(zlib.Z_FULL_FLUSH)
    block = z.compress(mib) + z.flush(zlib.Z_FULL_FLUSH)
    end = z.flush()[:-8]
    crc = _ZEROS_CRC.get(inflated)
    if crc is None:
        crc = 0
        for _ in range(inflated >> 20):
            crc = zlib.crc32(mib, crc)
    return first + block * ((inflated >> 20) - 1) + end + struct.pack("<II", crc, inflated & 0xFFFFFFFF)


def favour(pid: int, by: int = 10) -> None:
    """Raise the priority of every thread of a process tree by `by` nice steps (root only; a no-op otherwise).

    Relative, so what the daemon runs below its loop (the decoder process, the bcrypt thread) stays below it.

    The latency bound judges the daemon (does anything block its loop?), not the runner: on a 2-core machine
    that other jobs load to 20 runnable threads, a GET waits for a core for up to a second whatever the daemon
    does, and an attacker on the same machine takes CPU no remote one would.
    """
    with contextlib.suppress(psutil.Error, PermissionError):
        for proc in (psutil.Process(pid), *psutil.Process(pid).children(recursive=True)):
            for thread in proc.threads():
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PROCESS, thread.id, os.getpriority(os.PRIO_PROCESS, thread.id) - by)


def bomb(url: str, auth: dict[str, str], seconds: float, inflated: int = 1 << 30, senders: int = 3) -> Counter[str]:
    """`senders` clients post a gzip bomb (`inflated` zero bytes) again and again."""
    headers, body = {**PROTOBUF, **auth, "Content-Encoding": "gzip"}, gzip_bomb(inflated)
    return _threads(senders, seconds, lambda got: post(url, body, headers, got))


def unauthenticated(web: str, receiver: str, seconds: float) -> Counter[str]:
    """Gzip bombs to the receiver and POST /-/reload to the web listener, without credentials."""
    headers, body = {**PROTOBUF, "Content-Encoding": "gzip"}, gzip_bomb(256 << 20)  # cached: positional size
    got = Counter[str]()
    threads = [threading.Thread(target=lambda: got.update(_threads(2, seconds, lambda g: post(receiver, body,
                                                                                               headers, g)))),
               threading.Thread(target=lambda: got.update(reloads(web, seconds)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    return got


def slowloris(url: str, n: int, seconds: float) -> Counter[str]:
    """Open `n` connections over the first half of `seconds` that each send half a request head and then
    nothing; hold them to the end; close."""
    parts = urlsplit(url)
    socks, got = [], Counter[str]()
    start = time.monotonic()
    for i in range(n):
        time.sleep(max(0.0, start + i * seconds / 2 / n - time.monotonic()))
        try:
            s = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(s)
            got["open"] += 1
        except OSError as exc:
            got[type(exc).__name__] += 1
    time.sleep(max(0.0, start + seconds - time.monotonic()))
    for s in socks:
        try:
            s.settimeout(0.0)
            got["closed_by_daemon" if s.recv(1) == b"" else "alive"] += 1
        except BlockingIOError:
            got["alive"] += 1
        except OSError:
            got["closed_by_daemon"] += 1
        s.close()
    return got


def wrong_passwords(url: str, seconds: float, workers: int = 4) -> Counter[str]:
    """Clients GET /metrics with a new wrong password each time (no cache can help)."""
    parts, counter = urlsplit(url), iter(range(10**9))

    def one(got: Counter[str]) -> None:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        try:
            conn.request("GET", "/metrics", headers={"Authorization": basic("prometheus", f"guess-{next(counter)}")})
            resp = conn.getresponse()
            resp.read()
            got[str(resp.status)] += 1
        finally:
            conn.close()

    return _threads(workers, seconds, one)


def reloads(url: str, seconds: float, workers: int = 2) -> Counter[str]:
    """Clients POST /-/reload without credentials."""
    return _threads(workers, seconds, lambda got: post(url, b"", {}, got, path="/-/reload"))


def _spans(n: int, name: str, attrs: dict[str, object], parent: Callable[[bytes], bytes] | None = None,
           now_ns: int | None = None) -> bytes:
    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add().scope_spans.add()
    now = now_ns or time.time_ns()
    for _ in range(n):
        s = ss.spans.add()
        s.trace_id, s.span_id, s.name = os.urandom(16), os.urandom(8), name
        s.parent_span_id = parent(s.trace_id) if parent else os.urandom(8)
        s.start_time_unix_nano, s.end_time_unix_nano = now - 10**8, now
        for k, v in attrs.items():
            a = s.attributes.add()
            a.key = k
            if isinstance(v, str):
                a.value.string_value = v
            else:
                a.value.double_value = float(v)  # type: ignore[arg-type]
    return req.SerializeToString()


def unkeyed_parent(trace_id: bytes) -> bytes:
    """The probe span id an older sloguard sent: an unkeyed hash anyone can compute."""
    return hashlib.blake2b(trace_id, digest_size=8, person=b"sloguard-probe").digest()


VLLM = {"gen_ai.latency.time_to_first_token": 0.04, "gen_ai.latency.time_in_queue": 0.001,
        "gen_ai.latency.time_in_model_prefill": 0.03, "gen_ai.latency.time_in_model_decode": 0.2}


def span_flood(url: str, auth: dict[str, str], seconds: float, per_request: int = 2500) -> Counter[str]:
    """Flood the receiver with vLLM-shaped spans parented on the unkeyed probe span ids of random trace ids."""
    headers = {**PROTOBUF, **auth}
    return _threads(2, seconds, lambda got: post(url, _spans(per_request, "llm_request", VLLM, unkeyed_parent),
                                                   headers, got))


def hostile_spans(url: str, auth: dict[str, str], seconds: float) -> Counter[str]:
    """Spans with 100 KB attribute values (a key the join reads and one it does not), NaN, infinity, negative
    queues and an end in the year 2500."""
    headers = {**PROTOBUF, **auth}
    big = {**VLLM, "gen_ai.response.model": "m" * 100_000, "gen_ai.latency.e2e": "9" * 100_000}
    bodies = [_spans(50, "llm_request", {**VLLM, "gen_ai.latency.time_in_queue": v})
              for v in (float("nan"), float("inf"), -1.0)]
    bodies += [_spans(50, "llm_request", VLLM, now_ns=16_725_225_600 * 10**9), _spans(20, "llm_request", big)]
    counter = iter(range(10**9))
    return _threads(2, seconds, lambda got: post(url, bodies[next(counter) % len(bodies)], headers, got))


def slow_bodies(url: str, auth: dict[str, str], n: int, seconds: float) -> Counter[str]:
    """`n` exports whose 1 MiB body trickles in at 1 KiB per 100 ms (headers complete, body never is)."""
    parts, got = urlsplit(url), Counter[str]()
    socks = []
    head = "".join(f"{k}: {v}\r\n" for k, v in {**PROTOBUF, **auth, "Content-Length": str(1 << 20)}.items())
    for _ in range(n):
        try:
            s = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=5)
            s.sendall(f"POST /v1/traces HTTP/1.1\r\nHost: x\r\n{head}\r\n".encode())
            socks.append(s)
        except OSError as exc:
            got[type(exc).__name__] += 1
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for s in socks:
            with contextlib.suppress(OSError):
                s.sendall(b"\0" * 1024)
        time.sleep(0.1)
    for s in socks:
        s.close()
    got["sent"] += len(socks)
    return got


def gzip_export(body: bytes) -> bytes:
    return gzip.compress(body)
