"""A real Alertmanager (Debian's prometheus-alertmanager, installed by scripts/setup.sh) on free loopback ports, and
a webhook receiver for it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from support.procs import Proc, _spawn, free_port, http_get, wait_until

BLACKHOLE = "route: {receiver: blackhole, group_wait: 0s}\nreceivers: [{name: blackhole}]\n"


@contextmanager
def alertmanager(tmp: Path, config: str = BLACKHOLE) -> Iterator[Proc]:
    """Run Alertmanager with `config` until the block ends; fail (not skip) when it is not installed."""
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if binary is None:
        raise AssertionError("Alertmanager not installed: run scripts/setup.sh")
    port, cluster = free_port(), free_port()
    (tmp / f"am-{port}.yml").write_text(config)
    proc = _spawn([binary, f"--config.file={tmp / f'am-{port}.yml'}", f"--storage.path={tmp / f'am-{port}'}",
                   f"--web.listen-address=127.0.0.1:{port}", f"--cluster.listen-address=127.0.0.1:{cluster}"],
                  tmp / f"am-{port}.log", port)
    try:
        wait_until(lambda: http_get(f"{proc.url}/-/ready")[0] == 200, 30, "Alertmanager")
        yield proc
    finally:
        proc.stop()


def alerts(am: Proc, name: str, active: bool = True) -> list[dict[str, Any]]:
    """Return Alertmanager's alerts named `name`: active ones, or every resolved one."""
    q = "active=true&silenced=false&inhibited=false" if active else "active=false&unprocessed=false"
    doc: list[dict[str, Any]] = json.loads(http_get(f"{am.url}/api/v2/alerts?{q}")[1])
    return [a for a in doc if a["labels"].get("alertname") == name]


class Webhook:
    """Alertmanager's webhook receiver: every notification's JSON body, by path (/pages, /tickets)."""

    def __init__(self) -> None:
        self.received: dict[str, list[dict[str, Any]]] = {}

    async def _post(self, request: web.Request) -> web.Response:
        self.received.setdefault(request.path, []).append(json.loads(await request.read()))
        return web.Response(text="ok")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{path}", self._post)
        return app

    def notifications(self, path: str) -> list[dict[str, Any]]:
        """Return the notifications received at `path`, oldest first."""
        return list(self.received.get(path, []))
