"""Lease campaigns against an API server double with optimistic concurrency (tests/support/kubeapi.py).

One campaign step at a time, no waiting: who creates, who renews, who stands by, who takes over an expired Lease,
and that a write from a stale read (409 Conflict) or a lost create race (409 AlreadyExists) leaves the other
replica the holder.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp import web
from lightkube.core.exceptions import ApiError
from lightkube.resources.coordination_v1 import Lease

from sloguard.config.fleet import HASpec
from sloguard.discovery.kube import client
from sloguard.fleet.leader import LeaseLeadership
from tests.support.kubeapi import KubeAPI, kubeconfig


@asynccontextmanager
async def served(api: KubeAPI, tmp: Path) -> AsyncIterator[str]:
    runner = web.AppRunner(api.app(), shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    (tmp / "kubeconfig").write_text(kubeconfig(f"http://127.0.0.1:{runner.addresses[0][1]}"))
    try:
        yield str(tmp / "kubeconfig")
    finally:
        await runner.cleanup()


def candidate(me: str, kc: str) -> LeaseLeadership:
    return LeaseLeadership(HASpec(mode="lease", identity=me, kubeconfig=kc, lease_duration="15s", retry_period="2s"))


class Stale:
    """A client whose reads answer what another replica read a moment ago: an object, or the error it got."""

    def __init__(self, api: Any, read: Any) -> None:
        self.api, self.read = api, read

    async def get(self, *args: Any, **kw: Any) -> Any:
        if isinstance(self.read, BaseException):
            raise self.read
        return self.read

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        return getattr(self.api, name)  # type: ignore[no-any-return]


async def read(api: Any) -> Any:
    """Return the Lease as `api` reads it now, or the error it gets."""
    try:
        return await api.get(Lease, "sloguard-leader", namespace=None)
    except ApiError as exc:
        return exc


def run(main: Callable[[KubeAPI, str], Awaitable[None]], tmp: Path) -> KubeAPI:
    api = KubeAPI()

    async def go() -> None:
        async with served(api, tmp) as kc:
            await main(api, kc)
    asyncio.run(go())
    return api


def _expire(api: KubeAPI, name: str = "sloguard-leader") -> None:
    """Age the stored Lease past its duration (its holder stopped renewing 20 s ago)."""
    api.leases[name]["spec"]["renewTime"] = (datetime.now(UTC) - timedelta(seconds=20)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


def test_first_creates_second_stands_by_then_takes_over_an_expired_lease(tmp_path: Path) -> None:
    async def main(api: KubeAPI, kc: str) -> None:
        one, two = candidate("one", kc), candidate("two", kc)
        c1, c2 = client(None, kc, None), client(None, kc, None)
        try:
            assert await one._campaign(c1) is True  # 404, created
            assert await two._campaign(c2) is False  # held and fresh: no write
            assert await one._campaign(c1) is True  # renewed with the resourceVersion it read
            _expire(api)
            assert await two._campaign(c2) is True  # taken over
            assert await one._campaign(c1) is False  # the old holder sees it lost the Lease
        finally:
            await c1.close()
            await c2.close()

    api = run(main, tmp_path)
    spec = api.leases["sloguard-leader"]["spec"]
    assert spec["holderIdentity"] == "two" and spec["leaseTransitions"] == 1 and spec["leaseDurationSeconds"] == 15
    assert [(c.verb, c.code) for c in api.lease_calls if c.verb != "get"] == [
        ("create", 201), ("update", 200), ("update", 200)]


def test_a_write_from_a_stale_read_conflicts_and_the_other_keeps_the_lease(tmp_path: Path) -> None:
    async def main(api: KubeAPI, kc: str) -> None:
        one, two = candidate("one", kc), candidate("two", kc)
        c1, c2 = client(None, kc, None), client(None, kc, None)
        try:
            assert await one._campaign(c1) is True
            _expire(api)
            stale = Stale(c2, await read(c2))  # two reads the expired Lease ...
            assert await one._campaign(c1) is True  # ... one renews it meanwhile ...
            assert await two._campaign(stale) is False  # ... two's takeover carries the old resourceVersion: 409
        finally:
            await c1.close()
            await c2.close()

    api = run(main, tmp_path)
    assert api.leases["sloguard-leader"]["spec"]["holderIdentity"] == "one"
    assert ("update", 409) in [(c.verb, c.code) for c in api.lease_calls]


def test_a_lost_create_race_stands_by(tmp_path: Path) -> None:
    async def main(api: KubeAPI, kc: str) -> None:
        one, two = candidate("one", kc), candidate("two", kc)
        c1, c2 = client(None, kc, None), client(None, kc, None)
        try:
            missing = Stale(c2, await read(c2))  # two reads: 404 ...
            assert isinstance(missing.read, ApiError)
            assert await one._campaign(c1) is True  # ... one creates the Lease ...
            assert await two._campaign(missing) is False  # ... two's create gets 409 AlreadyExists
        finally:
            await c1.close()
            await c2.close()

    api = run(main, tmp_path)
    assert api.leases["sloguard-leader"]["spec"]["holderIdentity"] == "one"
    assert ("create", 409) in [(c.verb, c.code) for c in api.lease_calls]
