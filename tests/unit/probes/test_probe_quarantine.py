"""A target that floods is probed from a helper process: out on its first flood, back after RELEASE_AFTER clean."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import psutil
import pytest

from sloguard.model import ProbeResult
from sloguard.outcome import outcome
from sloguard.probes.job import ProbeJob, default_max_events
from sloguard.probes.quarantine import RELEASE_AFTER, RETRY_S, Quarantine
from sloguard.probes.worker import ProbeWorker
from tests.support import hostile_streams
from tests.support.procs import wait_until


def result(target: str, flood: bool) -> ProbeResult:
    return ProbeResult(ts=0.0, probe=target, target=target, model="m", api="chat", ok=not flood,
                       error="event flood: more than 320 events" if flood else None, ttft_s=None if flood else 0.1)


@pytest.mark.parametrize(("floods", "moves", "inside"), [
    ([False] * 20, [False] * 20, False),  # a healthy target never moves
    ([True], [True], True),  # the first flood moves it out
    ([True] + [False] * RELEASE_AFTER, [True] + [False] * (RELEASE_AFTER - 1) + [True], False),  # back when clean
    ([True] + [False] * (RELEASE_AFTER - 1) + [True] + [False] * (RELEASE_AFTER - 1),
     [True] + [False] * (2 * RELEASE_AFTER - 1), True),  # a flood in between starts the count again
])
def test_targets_move_on_their_first_flood_and_back_after_clean_results(
        floods: list[bool], moves: list[bool], inside: bool) -> None:
    q = Quarantine(forward=lambda _m: None, changed=lambda: None)
    assert [q.observe(result("t", f)) for f in floods] == moves
    assert ("t" in q.targets) == inside
    assert not q.observe(result("other", False)) and "other" not in q.targets


def test_no_target_moves_while_the_last_helper_death_is_recent() -> None:
    q = Quarantine(forward=lambda _m: None, changed=lambda: None)
    q._down_until = time.monotonic() + RETRY_S
    assert not q.observe(result("t", True)) and not q.targets


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    with hostile_streams.running() as base:
        yield base


def _helpers(worker: ProbeWorker) -> list[psutil.Process]:
    return psutil.Process(worker._proc.pid).children()


def test_the_flooding_target_is_probed_from_a_helper_until_it_is_gone(hostile: str) -> None:
    healthy = ProbeJob(name="h", target="h", api="chat", url=f"{hostile}/brisk", model="m", timeout=5.0, interval=0.3)
    flood = ProbeJob(name="f", target="f", api="chat", url=f"{hostile}/pings", model="m", timeout=5.0, interval=0.3,
                     max_events=default_max_events(64))  # as configured by default: the CPU budget ends it
    worker = ProbeWorker([healthy, flood])
    seen: Counter[tuple[str, str]] = Counter()

    def collect() -> Counter[tuple[str, str]]:
        seen.update((r.target, outcome(r)) for r in worker.drain())
        return seen

    worker.start()
    try:
        wait_until(lambda: collect()[("f", "event_flood")] >= 3 and len(_helpers(worker)) == 1, 30,
                   "floods answered from a helper process")
        assert set(seen) == {("h", "success"), ("f", "event_flood")}
        worker.update([healthy])  # no flooding target left: the helper exits
        wait_until(lambda: not _helpers(worker), 30, "the helper to exit")
        worker.update([healthy, flood])  # flooding again: a helper again
        wait_until(lambda: len(_helpers(worker)) == 1, 30, "a helper again")
        floods = collect()[("f", "event_flood")]
        _helpers(worker)[0].kill()  # a helper that dies hands its targets back, and no other starts for a while
        wait_until(lambda: collect()[("f", "event_flood")] >= floods + 3, 30, "floods probed here again")
        assert not _helpers(worker)
        before = collect()[("h", "success")]
        wait_until(lambda: collect()[("h", "success")] > before, 30, "the healthy probe to go on")
    finally:
        worker.stop()
    assert not worker.alive()
    assert set(seen) == {("h", "success"), ("f", "event_flood")}
