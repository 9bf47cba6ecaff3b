"""Kubernetes discovery through lightkube: list, then watch from the list's resourceVersion, like an informer.

- The list replaces the whole cache (so a pod deleted while no watch ran is gone), then the watch applies ADDED,
  MODIFIED and DELETED from that resourceVersion; BOOKMARK events (asked for) only advance it.
- A watch the server ends (its timeoutSeconds) is reopened from the last resourceVersion seen.
- 410 Gone (the resourceVersion was compacted away) relists at once; any other failure relists after a backoff
  (1 s doubling to 30 s), keeping the last good targets meanwhile. Each relist counts as a refresh.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Callable
from typing import Any

from sloguard.config.fleet import DiscoverySpec, KubernetesSDSpec
from sloguard.discovery.groups import Target
from sloguard.discovery.kubeobjects import targets
from sloguard.discovery.metrics import SDStats

log = logging.getLogger("sloguard.discovery")
Publish = Callable[[list[Target]], None]
WATCH_TIMEOUT = 300  # seconds a watch request lasts before the server ends it and it is reopened
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410): relist."""


def expand(value: str) -> str:
    """Return `value` with ${VAR} replaced from the environment; raise KeyError naming an unset one."""
    return _VAR.sub(lambda m: os.environ[m.group(1)], value)


def client(kube: KubernetesSDSpec | None, kubeconfig: str | None, namespace: str | None) -> Any:
    """Return a lightkube AsyncClient from a kubeconfig file, else the in-cluster service account."""
    from lightkube import AsyncClient, KubeConfig

    config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_service_account()
    return AsyncClient(config=config, namespace=namespace, trust_env=False)


class KubernetesSD:
    """Lists and watches pods or EndpointSlices of one discovery; publishes after the list and every event."""

    def __init__(self, spec: DiscoverySpec, publish: Publish, stats: SDStats) -> None:
        assert spec.kubernetes is not None
        self.spec, self.kube, self.publish, self.stats = spec, spec.kubernetes, publish, stats
        self._objects: dict[str, Any] = {}
        self._said: str | None = None

    def _resource(self) -> Any:
        if self.kube.role == "pod":
            from lightkube.resources.core_v1 import Pod

            return Pod
        from lightkube.resources.discovery_v1 import EndpointSlice

        return EndpointSlice

    def _params(self) -> dict[str, str | None]:
        fields = f"spec.nodeName={expand(self.kube.node)}" if self.kube.node and self.kube.role == "pod" else None
        return {"labelSelector": self.kube.selector or None, "fieldSelector": fields}

    async def run(self) -> None:
        """List and watch until cancelled."""
        backoff = 1.0
        api: Any = None
        try:
            while True:
                start = time.perf_counter()
                try:
                    api = api or client(self.kube, self.kube.kubeconfig, self.kube.namespace)
                    rv = await self._list(api)
                    self._ok(start)
                    backoff = 1.0
                    await self._watch(api, rv)
                except Gone:
                    self.stats.events[(self.kube.role, "relist")] += 1
                    continue
                except Exception as exc:  # a peer's failure (or a bad kubeconfig) is one refresh, never the end
                    self._failed(start, exc)
                    await asyncio.sleep(backoff)
                    backoff = min(30.0, backoff * 2)
        finally:
            if api is not None:
                await api.close()

    async def _list(self, api: Any) -> str:
        from lightkube.core.generic_client import ListAsyncIterable

        br = api._client.prepare_request("list", res=self._resource(), namespace=self.kube.namespace,
                                         params=self._params())
        items: ListAsyncIterable[Any] = api._client.list(br)
        objects = {f"{o.metadata.namespace}/{o.metadata.name}": o async for o in items}
        self._objects = objects
        self._publish()
        return str(items.resourceVersion)

    async def _watch(self, api: Any, rv: str) -> None:
        from lightkube.core.exceptions import ApiError

        # lightkube's watch() takes no allowWatchBookmarks: its request is built the same way with it added.
        params = {**self._params(), "resourceVersion": rv, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(WATCH_TIMEOUT)}
        br = api._client.prepare_request("list", res=self._resource(), namespace=self.kube.namespace, watch=True,
                                         params=params)
        try:
            async for kind, obj in api._client.watch(br):
                self._event(kind, obj)
        except ApiError as exc:
            if exc.status.code == 410:
                raise Gone() from None
            raise

    def _event(self, kind: str, obj: Any) -> None:
        self.stats.events[(self.kube.role, kind.lower())] += 1
        if kind == "BOOKMARK":
            return  # only advances the resourceVersion (lightkube tracks it)
        key = f"{obj.metadata.namespace}/{obj.metadata.name}"
        if kind == "DELETED":
            self._objects.pop(key, None)
        elif kind in ("ADDED", "MODIFIED"):
            self._objects[key] = obj
        self._publish()

    def _publish(self) -> None:
        found = targets(self._objects.values(), self.spec)
        self.stats.discovered = len(found)
        self.publish(found)

    def _ok(self, start: float) -> None:
        self.stats.refreshed(time.perf_counter() - start, True, time.time())
        if self._said is not None:
            log.info("kubernetes discovery recovered", extra={"discovery": self.spec.name})
            self._said = None

    def _failed(self, start: float, exc: BaseException) -> None:
        self.stats.refreshed(time.perf_counter() - start, False, time.time())
        self.stats.failures["kubernetes"] += 1
        text = f"{type(exc).__name__}: {exc}"[:300]
        if isinstance(exc, KeyError):
            text = f"environment variable {exc.args[0]} is not set (kubernetes.node)"
        if text != self._said:
            log.warning("kubernetes discovery failed; keeping the last good targets",
                        extra={"discovery": self.spec.name, "error": text, "kept": self.stats.discovered})
            self._said = text
