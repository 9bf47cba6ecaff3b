"""The Alertmanager notifier against a real Alertmanager: firing arrives with endsAt ahead, resolved ends it."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.alertmanager import alertmanager as real_alertmanager
from support.alertmanager import alerts
from support.procs import Proc, wait_until

from sloguard.alerts.service import Alerting
from sloguard.clock import SystemClock
from sloguard.config.spec import Config
from sloguard.model import Sample
from sloguard.store import Store

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    with real_alertmanager(tmp_path_factory.mktemp("am")) as proc:
        yield proc


def _alerts(am: Proc, active: bool) -> list[dict[str, Any]]:
    return alerts(am, "QueueTooDeep", active)


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
