"""HA leadership: which of several sloguard replicas sends notifications (ha.mode lease / file_lock).

Every replica evaluates and queues notifications alike; only the leader delivers. A replica standing by drops
its queued items once older than the handover window (lease_duration), counted as outcome `standby`, so a new
leader delivers only what the old one may not have sent in its last lease period: at most one lease period of
possible duplicates after a failover, never a backlog. Mode none / alertmanager: every replica sends
(Alertmanager deduplicates identical alerts).

- file_lock: an exclusive POSIX lock (flock) on `lock_file`; the kernel releases it the moment the holder
  dies, so a SIGKILLed leader is replaced within one retry_period.
- lease: a coordination.k8s.io/v1 Lease, renewed every retry_period with the resourceVersion it was read at
  (a concurrent writer gets 409 Conflict); taken over once renewTime + leaseDurationSeconds has passed. A leader
  that could not renew for lease_duration − retry_period (counted from before its last successful renewal was
  sent, so a slow API server cannot stretch it) stops sending a retry_period before anyone may take over.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import math
import os
import socket
import time
from datetime import UTC, datetime
from typing import Any

from prometheus_client.metrics_core import Metric

from sloguard.config.fleet import HASpec
from sloguard.families import declare

log = logging.getLogger("sloguard.ha")


def identity(spec: HASpec) -> str:
    """Return this replica's name in the election: ha.identity, $POD_NAME, else host name and pid."""
    return spec.identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


LEADER = declare("sloguard_ha_leader", "gauge", "1 while this replica is the one sending notifications.",
                 ("mode", "identity"))
SINCE = declare("sloguard_ha_leader_since_timestamp_seconds", "gauge", "When this replica became the leader.",
                ("mode", "identity"))

class Leadership:
    """Always the leader (mode none / alertmanager); the base of the elected kinds."""

    def __init__(self, spec: HASpec) -> None:
        self.spec, self.me = spec, identity(spec)
        self.handover = spec.lease_duration
        self._leader = spec.mode in ("none", "alertmanager")
        self.since: float | None = time.time() if self._leader else None
        self.changes = 0

    def is_leader(self) -> bool:
        """Return whether this replica delivers notifications now."""
        return self._leader

    def _set(self, leader: bool) -> None:
        if leader != self._leader:
            self._leader, self.changes = leader, self.changes + 1
            self.since = time.time() if leader else None
            log.warning("became the leader: sending notifications" if leader else
                        "lost leadership: standing by", extra={"identity": self.me, "mode": self.spec.mode})

    async def run(self) -> None:
        """Campaign until cancelled (nothing to do when always the leader)."""

    def families(self) -> list[Metric]:
        """Return sloguard_ha_leader{mode,identity} (1 while this replica sends) and its transitions."""
        fam = LEADER.gauge()
        fam.add_metric([self.spec.mode, self.me], 1.0 if self._leader else 0.0)
        since = SINCE.gauge()
        if self.since is not None:
            since.add_metric([self.spec.mode, self.me], self.since)
        return [fam, since]


class FileLeadership(Leadership):
    """The leader holds an exclusive flock on ha.lock_file while its process lives."""

    def __init__(self, spec: HASpec) -> None:
        super().__init__(spec)
        self._fd: int | None = None

    async def run(self) -> None:
        try:
            while True:
                try:
                    self._set(self._try())
                except OSError as exc:  # the lock file cannot be opened: stand by, say why once per change
                    if self._leader or self.changes == 0:
                        log.error("cannot open ha.lock_file; standing by",
                                  extra={"file": self.spec.lock_file, "error": str(exc)})
                    self._set(False)
                    self.changes = max(self.changes, 1)
                await asyncio.sleep(self.spec.retry_period)
        finally:
            if self._fd is not None:
                os.close(self._fd)

    def _try(self) -> bool:
        if self._fd is not None:
            return True  # held until the process ends (flock is released by the kernel on death)
        assert self.spec.lock_file is not None
        fd = os.open(self.spec.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{self.me}\n".encode())
        self._fd = fd
        return True


class LeaseLeadership(Leadership):
    """The leader holds a Kubernetes Lease, renewing it every retry_period."""

    def __init__(self, spec: HASpec) -> None:
        super().__init__(spec)
        self._renewed = 0.0  # monotonic time of the last successful renewal

    async def run(self) -> None:
        from sloguard.discovery.kube import client

        api: Any = None
        try:
            while True:
                try:
                    api = api or client(None, self.spec.kubeconfig, self.spec.namespace)
                    started = time.monotonic()  # not after: a slow renewal must not stretch the leader's term
                    if await self._campaign(api):
                        self._renewed = started
                except Exception as exc:  # an API hiccup is one failed renewal, never the loop's end
                    log.debug("lease campaign failed", extra={"error": f"{type(exc).__name__}: {exc}"[:200]})
                held = time.monotonic() - self._renewed < self.spec.lease_duration - self.spec.retry_period
                self._set(held)
                await asyncio.sleep(self.spec.retry_period)
        finally:
            if api is not None:
                await api.close()

    async def _campaign(self, api: Any) -> bool:
        """Create, renew or take over the Lease; return whether this replica holds it now."""
        from lightkube.core.exceptions import ApiError
        from lightkube.models.coordination_v1 import LeaseSpec
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.coordination_v1 import Lease

        now = datetime.now(UTC)
        try:
            lease = await api.get(Lease, self.spec.lease_name, namespace=self.spec.namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            spec = LeaseSpec(holderIdentity=self.me, leaseDurationSeconds=math.ceil(self.spec.lease_duration),
                             acquireTime=now, renewTime=now, leaseTransitions=0)
            try:
                await api.create(Lease(metadata=ObjectMeta(name=self.spec.lease_name), spec=spec),
                                 namespace=self.spec.namespace)
            except ApiError as exc2:
                if exc2.status.code != 409:
                    raise
                return False  # 409 AlreadyExists: another replica created it first; it holds the lease
            return True
        spec = lease.spec
        mine = spec.holderIdentity == self.me
        renewed = spec.renewTime or spec.acquireTime
        expired = renewed is None or (now - renewed).total_seconds() > (spec.leaseDurationSeconds or 0)
        if not mine and not expired:
            return False
        if not mine:
            spec.holderIdentity, spec.acquireTime = self.me, now
            spec.leaseTransitions = (spec.leaseTransitions or 0) + 1
        spec.renewTime, spec.leaseDurationSeconds = now, math.ceil(self.spec.lease_duration)
        with contextlib.suppress(ApiError):  # 409: another replica wrote first; it holds the lease
            await api.replace(lease, namespace=self.spec.namespace)
            return True
        return False


def leadership(spec: HASpec) -> Leadership:
    """Return the Leadership of an ha: block."""
    kinds: dict[str, type[Leadership]] = {"file_lock": FileLeadership, "lease": LeaseLeadership}
    return kinds.get(spec.mode, Leadership)(spec)
