"""Probe history: newest first, failures outlive successes, no per-token lists."""

from __future__ import annotations

from sloguard.model import ProbeResult
from sloguard.probes.history import ProbeHistory


def result(ts: float, ok: bool) -> ProbeResult:
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=ok,
                       error=None if ok else "boom", itls_s=(0.01,))


def test_failures_survive_many_later_successes() -> None:
    h = ProbeHistory(size=3)
    h.add(result(1, False))
    for ts in range(2, 100):
        h.add(result(ts, True))
    rows = h.snapshot()
    assert [r["ts"] for r in rows] == [99, 98, 97, 1]
    assert rows[-1]["error"] == "boom"
    assert all("itls_s" not in r for r in rows)


def test_failures_bounded_too() -> None:
    h = ProbeHistory(size=2)
    for ts in range(5):
        h.add(result(ts, False))
    assert [r["ts"] for r in h.snapshot()] == [4, 3]
