"""The Alerting facade over a real SQLite store: restarts, retries, expiry, permanent failures, duplicates."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sloguard.alerts.notifiers import NOTIFIERS, DeliveryError
from sloguard.alerts.routing import Notification
from sloguard.alerts.service import Alerting
from sloguard.clock import FakeClock
from sloguard.config.spec import Config
from sloguard.model import Sample
from sloguard.store import Store

HIGH = [Sample("m", {"inst": "a"}, 5.0)]


class FakeNotifier:
    """Answers with the scripted errors first, then succeeds; records what it delivered."""

    script: ClassVar[list[Exception]] = []
    sent: ClassVar[list[Notification]] = []

    def __init__(self, spec: Any, secret: str | None, clock: Any) -> None:
        self.name = spec.name

    async def send(self, note: Notification, ref: Mapping[str, str] | None) -> dict[str, str] | None:
        if FakeNotifier.script:
            raise FakeNotifier.script.pop(0)
        FakeNotifier.sent.append(note)
        return {"ts": str(len(FakeNotifier.sent))}

    async def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def fake_notifier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(NOTIFIERS, "webhook", FakeNotifier)
    FakeNotifier.script, FakeNotifier.sent = [], []


def config(for_: str = "0s", max_age: str = "10m", group_interval: str = "5m") -> Config:
    return Config.model_validate({
        "version": "sloguard/v1",
        "alerts": [{"name": "High", "expr": "m > 1", "for": for_, "severity": "page", "summary": "{{ $value }}"}],
        "notifiers": [{"name": "hook", "type": "webhook", "url": "http://127.0.0.1:9/x", "group_wait": "0s",
                       "max_delivery_age": max_age, "group_interval": group_interval}],
    })


def make(tmp_path: Path, clock: FakeClock, cfg: Config | None = None, grace: float = 0.0) -> Alerting:
    return Alerting(cfg or config(), Store(tmp_path / "s.db", clock), clock, {}, rng=random.Random(1),
                    startup_grace=grace)


def counts(svc: Alerting) -> dict[str, float]:
    fam = next(f for f in svc.families(0.0) if f.name == "sloguard_notifications")
    return {s.labels["outcome"]: s.value for s in fam.samples if s.value}


def test_restart_neither_repages_nor_loses_pending(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    svc = make(tmp_path, clock)
    svc.evaluate(HIGH, clock.now())
    asyncio.run(svc.deliver_due())
    assert len(FakeNotifier.sent) == 1
    clock.advance(15)
    again = make(tmp_path, clock)  # restart: same store
    again.evaluate(HIGH, clock.now())
    asyncio.run(again.deliver_due())
    assert len(FakeNotifier.sent) == 1 and again.outbox.pending() == {}
    assert [a["state"] for a in again.debug_json()["active"]] == ["firing"]  # type: ignore[index]


# After a restart with a 60 s grace: (seconds after the restart, samples) per evaluation -> statuses sent.
@pytest.mark.parametrize(("grace", "steps", "sent"), [
    (60.0, [(0.5, []), (30.0, [])], ["firing"]),                    # series not collected yet: held
    (60.0, [(0.5, []), (60.0, [])], ["firing", "resolved"]),         # grace over, still absent: resolved
    (60.0, [(0.5, HIGH), (30.0, HIGH), (90.0, HIGH)], ["firing"]),   # present at restart: no re-page
    (60.0, [(0.5, [Sample("m", {"inst": "a"}, 0.0)])], ["firing", "resolved"]),  # present and false
    (0.0, [(0.5, [])], ["firing", "resolved"]),                      # no grace: absent means false
])
def test_startup_grace_holds_restored_alerts_whose_series_are_absent(
        tmp_path: Path, grace: float, steps: list[tuple[float, list[Sample]]], sent: list[str]) -> None:
    clock, cfg = FakeClock(1000.0), config(group_interval="1s")
    svc = make(tmp_path, clock, cfg)
    svc.evaluate(HIGH, clock.now())
    asyncio.run(svc.deliver_due())
    restart = clock.now() + 15
    clock.advance(15)
    again = make(tmp_path, clock, cfg, grace=grace)
    for at, samples in steps:
        clock.advance(restart + at - clock.now())
        again.evaluate(samples, clock.now())
        asyncio.run(again.deliver_due())
    assert [n.status for n in FakeNotifier.sent] == sent


def test_pending_since_survives_restart(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    make(tmp_path, clock, config(for_="1m")).evaluate(HIGH, clock.now())
    clock.advance(60)
    svc = make(tmp_path, clock, config(for_="1m"))
    svc.evaluate(HIGH, clock.now())
    assert [a.state for a in svc.active.values()] == ["firing"]


def test_retry_honours_retry_after_then_delivers(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    svc = make(tmp_path, clock)
    FakeNotifier.script = [DeliveryError("HTTP 429", True, retry_after=30.0)]
    svc.evaluate(HIGH, clock.now())
    asyncio.run(svc.deliver_due())
    clock.advance(29)
    asyncio.run(svc.deliver_due())
    assert FakeNotifier.sent == []
    clock.advance(1)
    asyncio.run(svc.deliver_due())
    assert len(FakeNotifier.sent) == 1 and counts(svc) == {"retried": 1, "sent": 1}


def test_expiry_is_counted_and_raises_an_alert(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    svc = make(tmp_path, clock, config(max_age="1m"))
    FakeNotifier.script = [DeliveryError("HTTP 503", True)] * 100
    svc.evaluate(HIGH, clock.now())
    for _ in range(30):
        asyncio.run(svc.deliver_due())
        clock.advance(5)
    assert counts(svc)["expired"] == 1 and svc.outbox.pending() == {}
    svc.evaluate(HIGH, clock.now())
    names = {dict(a.labels)["alertname"] for a in svc.active.values()}
    assert "SloguardNotificationExpired" in names
    assert svc.debug_json()["outbox"]["dead"][0]["outcome"] == "expired"  # type: ignore[index]


def rejected(tmp_path: Path, clock: FakeClock) -> Alerting:
    """Return a service whose one notification was rejected permanently (dead-lettered)."""
    svc = make(tmp_path, clock)
    FakeNotifier.script = [DeliveryError("invalid_auth", False)]
    svc.evaluate(HIGH, clock.now())
    asyncio.run(svc.deliver_due())
    return svc


def test_permanent_failure_is_dead_lettered_and_alerted(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    svc = rejected(tmp_path, clock)
    assert counts(svc) == {"failed": 1}
    clock.advance(15)
    svc.evaluate(HIGH, clock.now())
    assert "SloguardNotificationFailed" in {dict(a.labels)["alertname"] for a in svc.active.values()}


def test_crash_between_send_and_ack_resends_once_counted_as_duplicate(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    svc = make(tmp_path, clock)
    svc.evaluate(HIGH, clock.now())
    svc.outbox.take("hook", clock.now())  # marked in flight, then the process dies before the ack
    again = make(tmp_path, clock)
    asyncio.run(again.deliver_due())
    asyncio.run(again.deliver_due())
    assert len(FakeNotifier.sent) == 1 and counts(again) == {"duplicate_possible": 1, "sent": 1}


def test_a_notifier_bug_is_retried_not_lost(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    svc = make(tmp_path, clock)
    FakeNotifier.script = [RuntimeError("boom")]
    svc.evaluate(HIGH, clock.now())
    asyncio.run(svc.deliver_due())
    clock.advance(300)
    asyncio.run(svc.deliver_due())
    assert len(FakeNotifier.sent) == 1 and counts(svc) == {"retried": 1, "sent": 1}


def test_families_and_resolved_notice(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    svc = make(tmp_path, clock)
    svc.evaluate(HIGH, clock.now())
    asyncio.run(svc.deliver_due())
    fams = {f.name: f for f in svc.families(clock.now())}
    assert {"sloguard_alerts", "sloguard_notifications", "sloguard_outbox_pending"} <= set(fams)
    assert [(s.labels, s.value) for s in fams["sloguard_alerts"].samples] == [
        ({"alertname": "High", "alertstate": "firing"}, 1.0)]
    clock.advance(300)
    svc.evaluate([], clock.now())
    asyncio.run(svc.deliver_due())
    assert [n.status for n in FakeNotifier.sent] == ["firing", "resolved"]


def test_delivery_goes_on_after_an_ack_instead_of_one_item_per_poll(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    svc = make(tmp_path, clock)
    queued = [Notification("hook", "hook/g", status, (), (), clock.now()) for status in ("firing", "resolved")] * 2
    with svc.conn:
        svc.outbox.put(queued, clock.now())
    asyncio.run(svc.deliver_due())  # one pass, no poll in between
    assert svc.outbox.pending() == {} and [n.status for n in FakeNotifier.sent] == [n.status for n in queued]


def test_prune_keeps_a_week_of_dead_letters(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    svc = rejected(tmp_path, clock)
    assert svc.prune(clock.now() + 6 * 86400) == 0 and svc.prune(clock.now() + 8 * 86400) == 1
    assert svc.debug_json()["outbox"]["dead"] == []  # type: ignore[index]


@pytest.mark.parametrize(("script", "expected"), [
    ([DeliveryError("timeout", True, ambiguous=True)], {"retried": 1, "sent": 1, "duplicate_possible": 1}),
    ([DeliveryError("HTTP 503", True, ambiguous=True)] * 2, {"retried": 2, "sent": 1, "duplicate_possible": 1}),
    ([DeliveryError("refused", True), DeliveryError("HTTP 502", True, ambiguous=True)],
     {"retried": 2, "sent": 1, "duplicate_possible": 1}),
    ([DeliveryError("HTTP 429", True, retry_after=1.0)], {"retried": 1, "sent": 1}),  # not processed: no dup
    ([DeliveryError("refused", True)], {"retried": 1, "sent": 1}),
])
def test_success_after_an_ambiguous_failure_counts_a_possible_duplicate(
        tmp_path: Path, script: list[Exception], expected: dict[str, float]) -> None:
    clock = FakeClock(1000.0)
    svc = make(tmp_path, clock)
    FakeNotifier.script = list(script)
    svc.evaluate(HIGH, clock.now())
    for _ in range(len(script) + 1):
        asyncio.run(svc.deliver_due())
        clock.advance(60)
    assert len(FakeNotifier.sent) == 1 and counts(svc) == expected


def test_a_stop_landing_as_the_loop_is_woken_ends_the_delivery_loop(tmp_path: Path) -> None:
    """The daemon's shutdown cancels `run()` in the turn a new alert wakes it: the loop must end, not swallow
    the cancel and deliver on (Python 3.11's wait_for did that, and the shutdown's gather waited for ever)."""
    svc = make(tmp_path, FakeClock(1000.0))

    async def scenario() -> bool:
        loop = asyncio.ensure_future(svc.run())
        for _ in range(100):  # to its wait for a wake-up (deliver_due awaits nothing with an empty outbox)
            await asyncio.sleep(0)
        svc._wake.set()  # a new alert...
        loop.cancel()  # ...and the shutdown, in one turn
        await asyncio.wait([loop], timeout=5.0)  # not asyncio.timeout: its cancel would end the loop for us
        ended = loop.done()
        loop.cancel()
        return ended
    assert asyncio.run(scenario())
