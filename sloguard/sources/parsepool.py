"""Where a scraped page is digested: small pages in a thread, large or compressed ones in one parser process.

Parsing is pure Python and holds the GIL; in a thread a 200k-line page (~0.4 s of parse) still delays the
event loop's /metrics answers by GIL hand-offs (benchmarks/hostile.py measures it). A page of at least
`PROCESS_THRESHOLD` bytes, or one that arrives compressed, is therefore spooled chunk by chunk to a temporary
file while it is read and digested by a separate process (spawned on first use, one for the daemon), which
inflates it (bounded by the body cap), parses it and returns only the small normalised view: the main process
never holds, copies, inflates or parses a large page. A dead parser process fails that scrape (reason `parse`)
and is replaced.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import multiprocessing
import os
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from sloguard.config.spec import TargetSpec
from sloguard.sources.base import SourceError
from sloguard.sources.limits import Digest, ScrapeLimits, digest

PROCESS_THRESHOLD = 1 << 20  # ~10k lines; below, a thread's parse takes a few ms
# zlib window bits per Content-Encoding: gzip header, or zlib/gzip header detected (47) for "deflate".
WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 47}


def sniff(body: str, content_type: str = "") -> str | None:
    """Return why `body` is not exposition text (HTML, JSON, JSON-quoted text), or None if it may be."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype in ("text/html", "application/json", "application/xhtml+xml"):
        return f"content type {ctype}"
    head = body.lstrip()[:1]
    kinds = {"<": "HTML or XML", "{": "JSON", "[": "JSON", '"': "JSON-quoted text"}
    return f"body looks like {kinds[head]}" if head in kinds else None


@dataclass
class Page:
    """One fetched body: in memory (small, plain), or spooled to `path` (large, or `encoding` compressed)."""

    data: bytes = b""
    path: str = ""
    encoding: str = ""
    size: int = 0  # bytes received (compressed size for an encoded page)
    owned: bool = True  # a spool file of ours (removed after use), not a file:// target's own file

    def discard(self) -> None:
        """Remove the spool file, if any and ours (idempotent)."""
        if self.path and self.owned:
            Path(self.path).unlink(missing_ok=True)


class PageWriter:
    """Collect a body as it arrives: in memory up to the threshold, then in a spool file; cap on raw bytes."""

    def __init__(self, cap: int, encoding: str = "", threshold: int = PROCESS_THRESHOLD) -> None:
        self.cap, self.encoding, self.threshold = cap, encoding, threshold
        self.chunks: list[bytes] = []
        self.size = 0
        self.file: tempfile._TemporaryFileWrapper[bytes] | None = None
        if encoding:
            self._spool()

    def add(self, chunk: bytes) -> None:
        """Append a chunk; raise SourceError too_large past the cap (the spool file is removed)."""
        self.size += len(chunk)
        if self.size > self.cap:
            self.abort()
            raise SourceError("too_large", f"body over {self.cap} bytes")
        if self.file is None and self.size >= self.threshold:
            self._spool()
        if self.file is not None:
            self.file.write(chunk)  # page cache, tens of microseconds per chunk: not worth a thread hop
        else:
            self.chunks.append(chunk)

    def head(self) -> str:
        """Return the start of an in-memory body, past leading whitespace, as text for sniff()."""
        return b"".join(self.chunks[:2])[:4096].lstrip()[:64].decode("utf-8", errors="replace")

    def finish(self) -> Page:
        """Return the page (a spooled one is closed, ready for the parser process)."""
        if self.file is None:
            return Page(data=b"".join(self.chunks), size=self.size)
        self.file.close()
        return Page(path=self.file.name, encoding=self.encoding, size=self.size)

    def abort(self) -> None:
        """Drop what was read (after a failure or cancellation)."""
        self.chunks = []
        if self.file is not None:
            self.file.close()
            Page(path=self.file.name).discard()
            self.file = None

    def _spool(self) -> None:
        self.file = tempfile.NamedTemporaryFile(prefix="sloguard-page-", delete=False)  # noqa: SIM115
        for chunk in self.chunks:
            self.file.write(chunk)
        self.chunks = []


def inflate(body: bytes, encoding: str, cap: int) -> bytes:
    """Return the inflated body; SourceError too_large past `cap` bytes, parse when it is not `encoding`."""
    error: zlib.error | None = None
    for wbits in (WBITS[encoding], -15):  # -15: raw deflate, which some servers send as "deflate"
        try:
            inflater = zlib.decompressobj(wbits)
            out = inflater.decompress(body, cap + 1)
            break
        except zlib.error as exc:
            error = exc
    else:
        raise SourceError("parse", f"corrupt {encoding} body: {error}")
    if len(out) > cap or inflater.unconsumed_tail:
        raise SourceError("too_large", f"body over {cap} bytes once inflated ({encoding})")
    return out


def read_back(page: Page, cap: int) -> bytes:
    """Return the raw bytes of a page (from its file when spooled); SourceError too_large past `cap`."""
    if not page.path:
        return page.data
    try:
        with open(page.path, "rb") as fh:
            body = fh.read(cap + 1)
    except OSError as exc:
        raise SourceError("connect", f"cannot read {Path(page.path).name}: {exc.strerror}") from None
    if len(body) > cap:
        raise SourceError("too_large", f"body over {cap} bytes")
    return body


def digest_page(page: Page, spec: TargetSpec, ts: float, limits: ScrapeLimits) -> Digest:
    """Read (and inflate) a page, decode it (invalid UTF-8 replaced) and digest it; thread or parser process."""
    body = read_back(page, spec.max_body_bytes)
    if page.encoding:
        body = inflate(body, page.encoding, spec.max_body_bytes)
        text = body.decode("utf-8", errors="replace")
        if why := sniff(text[:4096]):
            raise SourceError("not_metrics", why)
    else:
        text = body.decode("utf-8", errors="replace")
    return digest(text, spec, ts, limits)


def watch_parent(parent: int) -> None:
    """In the parser process: exit within a second once the daemon is gone (even after a SIGKILL).

    Its pool worker waits on a queue that a killed parent never closes, so it would otherwise live on.
    """
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="sloguard-parent-watch", daemon=True).start()


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        fn: Callable[[int], int] = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None
    return fn


_TRIM = _malloc_trim()


class ParsePool:
    """Digest pages off the event loop; one lazily spawned process for spooled pages, shared by all targets."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    async def digest(self, page: Page, spec: TargetSpec, ts: float, limits: ScrapeLimits) -> Digest:
        """Return the digest of `page` and remove its spool file; raise SourceError like `digest`."""
        if not page.path:
            return await asyncio.to_thread(digest_page, page, spec, ts, limits)
        pool = self._ensure()
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, digest_page, page, spec, ts, limits)
        except BrokenExecutor:
            self._drop(pool)
            raise SourceError("parse", "the parser process died; a new one starts with the next large page") \
                from None
        finally:
            page.discard()

    def trim_soon(self) -> None:
        """Return freed heap to the OS in a worker thread (ctypes releases the GIL)."""
        if _TRIM is not None:
            asyncio.get_running_loop().run_in_executor(None, _TRIM, 0)

    def _ensure(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # spawn, not fork: the daemon has threads (scheduler, executors) that a fork would copy mid-lock.
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=watch_parent, initargs=(os.getpid(),))
            return self._pool

    def _drop(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the parser process, if one was started."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


POOL = ParsePool()
