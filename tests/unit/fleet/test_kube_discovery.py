"""Kubernetes discovery against an API server double with list/watch semantics (tests/support/kubeapi.py).

The informer lists, watches from the list's resourceVersion, applies ADDED and DELETED, takes bookmarks, and
relists after 410 Gone, so a pod deleted while its watch was gone disappears too.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from aiohttp import web

from sloguard.config.fleet import DiscoverySpec, KubernetesSDSpec
from sloguard.discovery.groups import Target
from sloguard.discovery.kube import KubernetesSD
from sloguard.discovery.metrics import SDStats
from tests.support.kubeapi import KubeAPI, kubeconfig, pod

APP = {"app": "chat"}


def test_list_watch_bookmarks_and_410_relist(tmp_path: Path) -> None:
    async def main() -> None:
        api = KubeAPI()
        await api.add(pod("chat-0", "10.2.0.10", APP, annotations={"sloguard.io/model": "llama"}))
        await api.add(pod("chat-1", "10.2.0.11", APP))
        await api.add(pod("other-0", "10.2.0.20", {"app": "other"}))
        await api.add(pod("chat-far", "10.2.0.30", APP, node="node-b"))
        runner = web.AppRunner(api.app(), shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        cfg = tmp_path / "kubeconfig"
        cfg.write_text(kubeconfig(f"http://127.0.0.1:{runner.addresses[0][1]}"))
        spec = DiscoverySpec(name="pods", kubernetes=KubernetesSDSpec(
            selector="app=chat", node="${TEST_NODE}", port="http", kubeconfig=str(cfg)))
        seen: list[set[str]] = []
        published = asyncio.Event()

        def publish(found: list[Target]) -> None:
            seen.append({t.labels["pod"] for t in found})
            published.set()

        async def until(pods: set[str]) -> None:
            async with asyncio.timeout(10):
                while not seen or seen[-1] != pods:
                    published.clear()
                    await published.wait()

        stats = SDStats("pods", "kubernetes")
        os.environ["TEST_NODE"] = "node-a"
        task = asyncio.create_task(KubernetesSD(spec, publish, stats).run())
        try:
            await until({"chat-0", "chat-1"})  # the list: label and node selectors applied server-side
            await api.add(pod("chat-2", "10.2.0.12", APP))
            await until({"chat-0", "chat-1", "chat-2"})
            await api.delete("chat-0")
            await until({"chat-1", "chat-2"})
            assert stats.events[("pod", "bookmark")] >= 1
            await api.add(pod("chat-3", "10.2.0.13", APP, ready=False))  # not ready: no target
            await api.compact()  # the watch's resourceVersion is gone: 410, relist
            await api.delete("chat-1")  # ... a delete the dead watch never saw
            await until({"chat-2"})
            assert stats.events[("pod", "relist")] >= 1
            assert any("allowWatchBookmarks=true" in q and "resourceVersion=" in q for q in api.requests)
            assert stats.failures["kubernetes"] == 0
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await runner.cleanup()
            os.environ.pop("TEST_NODE", None)

    asyncio.run(main())
