"""Basic auth against bcrypt hashes, cheap under a flood of wrong passwords (as prometheus/exporter-toolkit).

Each credential's verdict (right or wrong) is cached for `ttl` seconds after its last use, keyed by a SHA-256
of user and password (no plaintext kept), so a scraper's credential costs one bcrypt per idle `ttl` and a
repeated wrong password costs one bcrypt in all. Checks that miss the cache run one at a time on a thread of
their own (exporter-toolkit's bcrypt mutex), niced 10 below the event loop: a flood of distinct wrong passwords
costs at most one core, only what the loop leaves, and never queues behind, or in front of, other handlers'
threads. When more than `max_waiting` checks wait, the
answer is "busy" (503) at once instead of a queue that grows with the flood.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

import bcrypt

# A valid hash that matches nothing, so unknown users cost the same bcrypt time as known ones.
_DUMMY_HASH = bcrypt.hashpw(b"sloguard-unknown-user", bcrypt.gensalt(rounds=10))
TTL_S = 60.0
CACHE_SIZE = 1024
MAX_WAITING = 64


def _lower_priority() -> None:
    """Run this thread's bcrypt checks below the event loop's priority: a flood of guesses never takes its core."""
    with contextlib.suppress(OSError, AttributeError):  # Linux: niceness is per thread
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10))


def _credentials(header: str | None) -> tuple[str, str] | None:
    if not header or not header.startswith("Basic "):
        return None
    try:
        user, sep, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return (user, password) if sep else None


class BasicAuth:
    """Verify `Authorization: Basic` headers against bcrypt hashes with a short per-credential cache."""

    def __init__(self, users: Mapping[str, bytes], ttl: float = TTL_S, size: int = CACHE_SIZE,
                 max_waiting: int = MAX_WAITING, clock: Callable[[], float] = time.monotonic) -> None:
        self.users, self.ttl, self.size, self.max_waiting, self._clock = dict(users), ttl, size, max_waiting, clock
        self._cache: OrderedDict[bytes, tuple[bool, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._waiting = 0
        self.bcrypt_checks = 0

    @staticmethod
    def _key(user: str, password: str) -> bytes:
        return hashlib.sha256(f"{len(user)}:{user}\0{password}".encode()).digest()

    def cached(self, header: str | None) -> bool | None:
        """Return the cached verdict for this header (False for a malformed one), None when bcrypt must decide."""
        creds = _credentials(header)
        if creds is None:
            return False
        key, now = self._key(*creds), self._clock()
        with self._lock:
            hit = self._cache.get(key)
            if hit is None or hit[1] <= now:
                return None
            self._cache[key] = (hit[0], now + self.ttl)  # in use: kept while used at least once per ttl
            self._cache.move_to_end(key)
            return hit[0]

    def check(self, header: str | None) -> bool:
        """Return whether the header carries a valid user and password (bcrypt on a miss; blocking)."""
        verdict = self.cached(header)
        if verdict is not None:
            return verdict
        creds = _credentials(header)
        assert creds is not None  # cached() returned None, so the header parsed
        user, password = creds
        hashed = self.users.get(user, _DUMMY_HASH)
        try:
            ok = bcrypt.checkpw(password.encode(), hashed) and user in self.users
        except ValueError:  # bcrypt refuses passwords over 72 bytes: a wrong password, not a server error
            ok = False
        self.bcrypt_checks += 1
        with self._lock:
            self._cache[self._key(user, password)] = (ok, self._clock() + self.ttl)
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return ok

    async def allowed(self, header: str | None) -> bool | None:
        """Return the verdict without blocking the loop; None when too many checks already wait (answer 503)."""
        verdict = self.cached(header)
        if verdict is not None:
            return verdict
        if self._waiting >= self.max_waiting:
            return None
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sloguard-bcrypt",
                                                initializer=_lower_priority)
        self._waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, self.check, header)
        finally:
            self._waiting -= 1
