"""One source's exception, hang or error never affects another; up/duration/failures are recorded."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from sloguard.clock import FakeClock
from sloguard.snapshot import Snapshot
from sloguard.sources.base import Source, SourceAbsent, SourceError, SourceOutput
from sloguard.sources.runner import SourceRunner, source_key


class FakeSource:
    def __init__(self, target: str, behaviour: str) -> None:
        self.kind, self.target, self.interval, self.timeout = "fake", target, 10.0, 0.05
        self.behaviour = behaviour

    async def collect(self) -> SourceOutput:
        if self.behaviour == "raise":
            raise RuntimeError("boom")
        if self.behaviour == "error":
            raise SourceError("http_status", "HTTP 500")
        if self.behaviour == "absent":
            raise SourceAbsent("library_not_found", "no NVIDIA driver library")
        if self.behaviour == "hang":
            await asyncio.Event().wait()
        g = GaugeMetricFamily("sloguard_fake", "doc", labels=["target"])
        g.add_metric([self.target], 1)
        return SourceOutput([g], payload=self.target)

    async def close(self) -> None:
        return None


def _run(sources: list[FakeSource]) -> tuple[SourceRunner, list[object]]:
    snap, seen = Snapshot(), []
    runner = SourceRunner(snap, lambda src, out: seen.append(out.payload), FakeClock(1000.0))

    runner.sources = list(sources)

    async def go() -> None:
        await asyncio.gather(*(runner.run_once(s) for s in sources))

    asyncio.run(go())
    return runner, seen


def _value(runner: SourceRunner, family: str, target: str) -> float | None:
    for fam in runner.families():
        for s in fam.samples:
            if s.name == family and s.labels.get("target") == target:
                return s.value
    return None


def test_failures_are_isolated() -> None:
    good = FakeSource("ok", "ok")
    runner, seen = _run([FakeSource("a", "raise"), FakeSource("b", "hang"), FakeSource("c", "error"), good])
    assert seen == ["ok"]
    assert _value(runner, "sloguard_source_up", "ok") == 1.0
    for t in ("a", "b", "c"):
        assert _value(runner, "sloguard_source_up", t) == 0.0
    assert _value(runner, "sloguard_source_last_success_timestamp_seconds", "ok") == 1000.0
    reasons = {s.labels["target"]: s.labels["reason"] for f in runner.families() for s in f.samples
               if s.name == "sloguard_source_failures_total"}
    assert reasons == {"a": "exception", "b": "timeout", "c": "http_status"}
    keys = runner.snapshot.keys()
    assert source_key(good) in keys and "source/fake/a" not in keys


def test_a_failing_source_drops_its_stale_families() -> None:
    src = FakeSource("x", "ok")
    snap = Snapshot()
    runner = SourceRunner(snap, lambda s, o: None, FakeClock())
    runner.sources = [src]
    asyncio.run(runner.run_once(src))
    assert b"sloguard_fake" in snap.render()
    src.behaviour = "error"
    asyncio.run(runner.run_once(src))
    assert b"sloguard_fake{" not in snap.render()


def test_fake_source_satisfies_protocol() -> None:
    s: Source = FakeSource("x", "ok")
    assert s.kind == "fake"


def test_a_run_that_finishes_after_a_reload_removed_its_source_is_discarded() -> None:
    snap, seen = Snapshot(), []
    runner = SourceRunner(snap, lambda src, out: seen.append(out.payload), FakeClock())
    gone, kept = FakeSource("gone", "ok"), FakeSource("kept", "ok")
    release = asyncio.Event()
    original = gone.collect

    async def slow() -> SourceOutput:
        await release.wait()
        return await original()

    gone.collect = slow  # type: ignore[method-assign]

    async def go() -> None:
        runner.sources = [gone, kept]
        task = asyncio.create_task(runner.run_once(gone))
        await asyncio.sleep(0)
        runner.sources = [kept]  # what replace() leaves after a reload removed "gone"
        runner.snapshot.drop(source_key(gone))
        release.set()
        await task

    asyncio.run(go())
    present = snap.keys()
    assert seen == [] and source_key(gone) not in present


def test_absent_source_exports_nothing_and_logs_once(caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="sloguard.runner")
    src = FakeSource("gpu", "absent")
    runner, seen = _run([src])
    asyncio.run(runner.run_once(src))  # the second run logs nothing new
    assert seen == [] and _value(runner, "sloguard_source_up", "gpu") is None
    assert [r.getMessage() for r in caplog.records if r.name == "sloguard.runner"] == ["source absent"]
    src.behaviour = "ok"  # the driver appears: the source is up like any other
    asyncio.run(runner.run_once(src))
    assert _value(runner, "sloguard_source_up", "gpu") == 1.0
