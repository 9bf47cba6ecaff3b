"""Where a scraped page is digested: small pages in a thread, large ones in one parser process.

Parsing is pure Python and holds the GIL; in a thread a 200k-line page (~0.4 s of parse) still delays the
event loop's /metrics answers by GIL hand-offs (benchmarks/hostile.py measures it). Pages of at least
`PROCESS_THRESHOLD` bytes therefore go to a separate process (spawned on first use, one for the daemon),
which receives the raw bytes and returns only the small normalised view: the main process neither parses nor
holds the page's samples. A dead parser process fails that scrape (reason `parse`) and is replaced.
After a large page the freed heap is handed back to the OS (glibc `malloc_trim`): without it, every
15 MB page left ~60 MB of freed-but-kept heap in the daemon's RSS (measured, benchmarks/hostile.py).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, ProcessPoolExecutor

from sloguard.config.spec import TargetSpec
from sloguard.sources.base import SourceError
from sloguard.sources.limits import Digest, ScrapeLimits, digest

PROCESS_THRESHOLD = 1 << 20  # ~10k lines; below, a thread's parse takes a few ms


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        fn: Callable[[int], int] = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None
    return fn


_TRIM = _malloc_trim()


def digest_bytes(body: bytes, spec: TargetSpec, ts: float, limits: ScrapeLimits) -> Digest:
    """Decode (invalid UTF-8 replaced) and digest one page; runs in the parser process or a thread."""
    return digest(body.decode("utf-8", errors="replace"), spec, ts, limits)


class ParsePool:
    """Digest pages off the event loop; one lazily spawned process for large pages, shared by all targets."""

    def __init__(self, threshold: int = PROCESS_THRESHOLD) -> None:
        self.threshold = threshold
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    async def digest(self, body: bytes, spec: TargetSpec, ts: float, limits: ScrapeLimits) -> Digest:
        """Return the digest of `body`; raise SourceError (limits, parse) like `digest`."""
        if not self.is_large(len(body)):
            return await asyncio.to_thread(digest_bytes, body, spec, ts, limits)
        pool = self._ensure()
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, digest_bytes, body, spec, ts, limits)
        except BrokenExecutor:
            self._drop(pool)
            raise SourceError("parse", "the parser process died; a new one starts with the next large page") from None

    def is_large(self, size: int) -> bool:
        """Return True when a page of `size` bytes goes to the parser process."""
        return size >= self.threshold

    def trim_soon(self) -> None:
        """Return freed heap to the OS after a large page, in a worker thread (ctypes releases the GIL)."""
        if _TRIM is not None:
            asyncio.get_running_loop().run_in_executor(None, _TRIM, 0)

    def _ensure(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # spawn, not fork: the daemon has threads (scheduler, executors) that a fork would copy mid-lock.
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
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
