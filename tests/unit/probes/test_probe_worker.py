"""The probe process's scheduler: a probe whose settings change on reload keeps its phase; results over a Pipe."""

from __future__ import annotations

import asyncio
import multiprocessing as mp

import pytest

from sloguard.probes.job import ProbeJob
from sloguard.probes.outbox import Outbox
from sloguard.probes.worker import _Runner


def job(name: str, interval: float = 100.0, **kw: object) -> ProbeJob:
    return ProbeJob(name=name, target="t", api="chat", url="http://127.0.0.1:1", model="m", interval=interval,
                    **kw)  # type: ignore[arg-type]


def test_changed_settings_keep_the_phase_new_probes_are_spread() -> None:
    cmd, _ = mp.Pipe()
    results, _peer = mp.Pipe(duplex=False)

    async def scenario() -> tuple[dict[str, float], dict[str, float], float]:
        runner = _Runner(cmd, results, parent_pid=0)
        now = asyncio.get_running_loop().time()
        runner._apply([job("a"), job("b")])
        first = dict(runner._due)
        runner._apply([job("a"), job("b", max_tokens=7), job("c")])  # b changed, c new
        second = dict(runner._due)
        for task in runner._schedules.values():
            task.cancel()
        return first, second, now

    first, second, now = asyncio.run(scenario())
    assert first["b"] - now == pytest.approx(50.0, abs=1.0)  # spread over the interval
    assert second["b"] == first["b"]  # the changed probe fires where it would have, not at once
    assert second["a"] == first["a"] and "c" in second


def test_outbox_delivers_in_order_and_flushes_on_close() -> None:
    recv, send = mp.Pipe(duplex=False)
    box = Outbox(send)
    for i in range(500):
        box.put(("result", i))
    got = []
    while len(got) < 500:
        got.append(recv.recv()[1])
    box.close()
    assert got == list(range(500))
