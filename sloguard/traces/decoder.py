"""Inflate and decode OTLP bodies in a worker process, so the daemon's event loop only moves bytes.

Why a process and not a thread: upb's FromString of a 15 MiB request is one C call that holds the GIL for
its whole length (81 ms measured), and json.loads of a 64 MiB body 2.1 s; in a thread either would stall
/metrics as long (benchmarks/otlp_receiver.py measures the loop's stall each way). The worker is spawned once
with the receiver, niced 5 below the daemon, decodes one body at a time, is replaced every MAX_TASKS bodies
(returning what a hostile body grew its heap to) and when it dies (that request is answered 503, which
exporters retry).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import zlib
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from sloguard.traces import ids
from sloguard.traces.otlp import Decoded, MalformedRequest, Window

MAX_TASKS = 500
MAX_MEMBERS = 64  # gzip members in one body (exporters send one)
RATIO_FLOOR = 1024 * 1024  # any body may inflate this far, whatever its ratio (the first steps of a stream)
STEP = 256 * 1024  # output between two ratio checks
ENCODINGS = {"": 0, "identity": 0, "gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS,
             "deflate": zlib.MAX_WBITS}


class TooLarge(ValueError):
    """The body inflates past the byte limit or the ratio limit."""


class Busy(RuntimeError):
    """The decoder process died or is being replaced; the request may be retried."""


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """At most `max_bytes` as sent and after inflating, and at most `max_ratio` times the sent size inflated."""

    max_bytes: int
    max_ratio: float = 100.0


def inflate(body: bytes, encoding: str, limits: BodyLimits) -> bytes:
    """Return the body inflated once per its Content-Encoding; raise TooLarge or MalformedRequest.

    The ratio is checked as the output grows (every STEP bytes), so a bomb is stopped after ~1 MiB of work
    rather than at the byte limit.
    """
    wbits = ENCODINGS[encoding]
    if not wbits:
        return body
    out, rest, used = bytearray(), body, 0
    for _ in range(MAX_MEMBERS):
        d, data = zlib.decompressobj(wbits), rest
        while True:
            try:
                out += d.decompress(data, STEP)
            except zlib.error as exc:
                if encoding == "deflate" and not out and wbits > 0:  # some clients send raw deflate for "deflate"
                    wbits = -zlib.MAX_WBITS
                    break
                raise MalformedRequest(f"{encoding}: {exc}") from None
            consumed = used + len(rest) - len(d.unconsumed_tail) - len(d.unused_data)
            if len(out) > min(limits.max_bytes, max(RATIO_FLOOR, consumed * limits.max_ratio)):
                raise TooLarge(f"inflates past {len(out)} bytes from {consumed} ({limits.max_bytes} or "
                               f"{limits.max_ratio:g}x at most)")
            if not d.unconsumed_tail:
                break
            data = d.unconsumed_tail
        if wbits < 0 and not d.eof and not out:
            continue  # retry this member as raw deflate
        if not d.eof:
            raise MalformedRequest(f"{encoding}: truncated")
        used, rest = used + len(rest) - len(d.unused_data), d.unused_data
        if not rest or wbits != 16 + zlib.MAX_WBITS:
            return bytes(out)
    raise MalformedRequest(f"gzip: more than {MAX_MEMBERS} members")


def work(body: bytes, encoding: str, json_body: bool, limits: BodyLimits, keep_raw: bool, window: Window) -> Decoded:
    """Inflate and decode one request (runs in the decoder process; pure apart from its inputs)."""
    data = inflate(body, encoding, limits)
    if json_body:
        from sloguard.traces.otlpjson import decode_json

        return decode_json(data, keep_raw, window)
    from sloguard.traces.otlp import decode

    return decode(data, keep_raw, window)


def _init(key: bytes) -> None:
    ids.use_key(key)
    with contextlib.suppress(OSError):
        os.nice(5)  # decoding what peers send yields the CPU to the daemon's loop


class Decoder:
    """The decoder process, started with the receiver."""

    def __init__(self, limits: BodyLimits, keep_raw: bool) -> None:
        self.limits, self.keep_raw = limits, keep_raw
        self._pool: ProcessPoolExecutor | None = None
        self.restarts = 0

    def start(self) -> None:
        """Spawn the worker (its imports take ~0.5 s, paid now rather than by the first export)."""
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"), initializer=_init,
                                         initargs=(ids.key(),), max_tasks_per_child=MAX_TASKS)
        self._pool.submit(inflate, b"", "", self.limits)

    async def decode(self, body: bytes, encoding: str, json_body: bool, window: Window) -> Decoded:
        """Return the decoded request; raise TooLarge, MalformedRequest, KeyError (encoding) or Busy."""
        if self._pool is None:
            self.start()
        assert self._pool is not None
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._pool, work, body, encoding, json_body, self.limits, self.keep_raw, window)
        except BrokenProcessPool:
            self.restarts += 1
            self.close()
            self.start()
            raise Busy("the decoder process died; it was restarted") from None

    def close(self) -> None:
        """Stop the worker without waiting for queued bodies."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
