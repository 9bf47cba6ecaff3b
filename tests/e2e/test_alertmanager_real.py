"""The Alertmanager notifier against a real Alertmanager: firing arrives with endsAt ahead, resolved ends it."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.procs import Proc, _spawn, free_port, http_get, wait_until

from sloguard.alerts.service import Alerting
from sloguard.clock import SystemClock
from sloguard.config.spec import Config
from sloguard.model import Sample
from sloguard.store import Store

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if binary is None:
        raise AssertionError("Alertmanager not installed: run scripts/setup.sh")
    tmp = tmp_path_factory.mktemp("am")
    (tmp / "am.yml").write_text("route: {receiver: blackhole, group_wait: 0s}\nreceivers: [{name: blackhole}]\n")
    port, cluster = free_port(), free_port()
    proc = _spawn([binary, f"--config.file={tmp / 'am.yml'}", f"--storage.path={tmp / 'data'}",
                   f"--web.listen-address=127.0.0.1:{port}", f"--cluster.listen-address=127.0.0.1:{cluster}"],
                  tmp / "am.log", port)
    try:
        wait_until(lambda: http_get(f"{proc.url}/-/ready")[0] == 200, 30, "Alertmanager")
        yield proc
    finally:
        proc.stop()


def _alerts(am: Proc, active: bool) -> list[dict[str, Any]]:
    q = "active=true&silenced=false&inhibited=false" if active else "active=false&unprocessed=false"
    doc: list[dict[str, Any]] = json.loads(http_get(f"{am.url}/api/v2/alerts?{q}")[1])
    return [a for a in doc if a["labels"].get("alertname") == "QueueTooDeep"]


def test_firing_then_resolved_in_real_alertmanager(alertmanager: Proc, tmp_path: Path) -> None:
    cfg = Config.model_validate({
        "version": "sloguard/v1", "builtin_alerts": False,
        "alerts": [{"name": "QueueTooDeep", "expr": "sloguard_server_requests_waiting > 10", "severity": "page",
                    "summary": "{{ $labels.target }} queue {{ $value }}"}],
        "notifiers": [{"name": "am", "type": "alertmanager", "url": alertmanager.url}]})
    clock = SystemClock()
    svc = Alerting(cfg, Store(tmp_path / "s.db", clock), clock, {}, rng=random.Random(0))
    deep = [Sample("sloguard_server_requests_waiting", {"target": "chat", "model": "m"}, 42.0)]

    async def deliver() -> None:
        await svc.deliver_due()

    svc.evaluate(deep, clock.now())
    asyncio.run(deliver())
    wait_until(lambda: bool(_alerts(alertmanager, active=True)), 10, "the firing alert in Alertmanager")
    [firing] = _alerts(alertmanager, active=True)
    assert firing["labels"]["target"] == "chat" and firing["labels"]["severity"] == "page"
    assert firing["annotations"]["summary"] == "chat queue 42"
    ends = datetime.fromisoformat(firing["endsAt"].replace("Z", "+00:00")).timestamp()
    assert ends > time.time() + 30, "firing alerts are sent with endsAt well ahead"

    svc.evaluate([Sample("sloguard_server_requests_waiting", {"target": "chat", "model": "m"}, 1.0)], clock.now())
    asyncio.run(deliver())
    wait_until(lambda: not _alerts(alertmanager, active=True), 10, "the alert resolved in Alertmanager")
