"""The last success and its age continue across a restart: restored from the store, never restarted at 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from sloguard.clock import FakeClock
from sloguard.model import ProbeResult
from sloguard.probes.metrics import ProbeMetrics
from sloguard.store import Store


def _r(ts: float, probe: str = "p", ok: bool = True, e2e: float | None = 0.5) -> ProbeResult:
    return ProbeResult(ts=ts, probe=probe, target="t", model="m", api="chat", ok=ok, e2e_s=e2e if ok else None,
                       error=None if ok else "http_500")


def _values(m: ProbeMetrics, now: float) -> dict[tuple[str, str], float]:
    return {(f.name, s.labels["probe"]): s.value for f in m.families(now) for s in f.samples
            if f.name.startswith("sloguard_probe_last_success")}


def test_store_baselines_give_first_request_and_end_of_last_success(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", FakeClock(0.0))
    store.add_probe_results([_r(100.0), _r(110.0, e2e=2.0), _r(120.0, ok=False), _r(105.0, "never", ok=False),
                             _r(130.0, "never", ok=False)])
    assert store.probe_baselines() == {"p": (100.0, 112.0), "never": (105.0, None)}
    store.close()


@pytest.mark.parametrize(("baselines", "now", "age", "ts"), [
    ({"p": (100.0, 112.0)}, 150.0, 38.0, 112.0),   # age from the stored last success, not from this start (140)
    ({"p": (100.0, None)}, 150.0, 50.0, None),     # never succeeded: from its first recorded request
    ({}, 150.0, 10.0, None),                       # nothing known: from this process's start
    ({"gone": (1.0, 2.0)}, 150.0, 10.0, None),     # a probe no longer configured is not resurrected
])
def test_restore_continues_the_age(baselines: dict[str, tuple[float, float | None]], now: float, age: float,
                                   ts: float | None) -> None:
    m = ProbeMetrics(start=140.0)
    m.expect(["p"])
    m.restore(baselines)
    got = _values(m, now)
    assert got[("sloguard_probe_last_success_age_seconds", "p")] == pytest.approx(age)
    assert got.get(("sloguard_probe_last_success_timestamp_seconds", "p")) == ts
    assert ("sloguard_probe_last_success_age_seconds", "gone") not in got


def test_a_new_success_after_restore_wins_and_an_old_one_does_not() -> None:
    m = ProbeMetrics(start=140.0)
    m.expect(["p"])
    m.restore({"p": (100.0, 112.0)})
    m.observe(_r(90.0, e2e=1.0))  # late, older than the stored success
    assert _values(m, 150.0)[("sloguard_probe_last_success_timestamp_seconds", "p")] == 112.0
    m.observe(_r(145.0, e2e=1.0))
    assert _values(m, 150.0)[("sloguard_probe_last_success_age_seconds", "p")] == pytest.approx(4.0)
