"""ServerWatch stops at the stage's end whatever the scrape in flight is doing (a stuck watch held the run)."""

from __future__ import annotations

import asyncio

from sloguard.bench.watch import ServerWatch
from sloguard.config.spec import TargetSpec
from sloguard.model import ServerView
from sloguard.sources.base import SourceOutput

VIEW = ServerView("sim", "vllm", 0.0, {})


class _Scrape:
    """A scrape whose first collection waits for `gate`; later ones answer at once."""

    timeout = 5.0

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.calls = 0

    async def collect(self) -> SourceOutput:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            await self.gate
        return SourceOutput(families=[], payload=VIEW)


async def _stopped(watch: ServerWatch, scrape: _Scrape) -> int:
    """Stop the watch; return the scrapes it made, or -1 when `stop()` is still waiting 5 s later.

    asyncio.wait, not asyncio.timeout: a timeout's cancel would reach the watch's task through the awaiting
    one and end it, passing the very test that should fail.
    """
    stopping = asyncio.ensure_future(watch.stop())
    await asyncio.wait([stopping], timeout=5.0)
    return scrape.calls if stopping.done() else -1


def test_stop_as_the_scrape_in_flight_completes_ends_the_watch() -> None:
    """The stop's cancel and the scrape's answer land in one loop turn: Python 3.11's wait_for returned the
    answer and dropped the cancel, so the watch went on scraping and `stop()` never returned (CI: a bench
    that hung until pytest's 300 s timeout)."""
    async def scenario() -> int:
        watch = ServerWatch(TargetSpec(name="sim"), None, interval=3600.0, nvml=False)
        scrape = _Scrape()
        watch._scrape = scrape  # type: ignore[assignment]
        watch.start()
        await scrape.entered.wait()
        scrape.gate.set_result(None)  # the answer arrives...
        return await _stopped(watch, scrape)  # ...as the stage ends: cancel + the final sample
    assert asyncio.run(scenario()) == 2  # the periodic one (answered or cancelled) and the final one


def test_stop_while_waiting_between_scrapes_ends_the_watch_at_once() -> None:
    async def scenario() -> int:
        watch = ServerWatch(TargetSpec(name="sim"), None, interval=3600.0, nvml=False)
        scrape = _Scrape()
        scrape.gate.set_result(None)
        watch._scrape = scrape  # type: ignore[assignment]
        watch.start()
        while not watch.views:  # the first scrape landed: the watch waits out its interval
            await asyncio.sleep(0)
        await _stopped(watch, scrape)
        return len(watch.views)
    assert asyncio.run(scenario()) == 2  # the first and the final one
