"""Probe history: newest first, failures outlive successes, no per-token data, pages bounded."""

from __future__ import annotations

import pytest

from sloguard.model import ProbeResult
from sloguard.probes.history import MAX_PAGE, ProbeHistory


def result(ts: float, ok: bool, probe: str = "p") -> ProbeResult:
    return ProbeResult(ts=ts, probe=probe, target="t", model="m", api="chat", ok=ok, ttft_s=0.1,
                       error=None if ok else "boom", itl_counts=(1, 2), itl_sum_s=0.03)


def test_failures_survive_many_later_successes() -> None:
    h = ProbeHistory(size=3)
    h.add(result(1, False))
    for ts in range(2, 100):
        h.add(result(ts, True))
    rows = h.snapshot()
    assert [r["ts"] for r in rows] == [99, 98, 97, 1]
    assert rows[-1]["error"] == "boom" and rows[-1]["outcome"] == "error"
    assert all("itl_counts" not in r and "itl_sum_s" not in r for r in rows)


def test_failures_bounded_too() -> None:
    h = ProbeHistory(size=2)
    for ts in range(5):
        h.add(result(ts, False))
    assert [r["ts"] for r in h.snapshot()] == [4, 3]


@pytest.mark.parametrize(("query", "want"), [
    ({}, list(range(599, 499, -1))),                            # default page: the newest 100
    ({"limit": "3"}, [599, 598, 597]),
    ({"limit": "2", "offset": "3"}, [596, 595]),
    ({"limit": "100000"}, list(range(599, 599 - MAX_PAGE, -1))),  # capped
    ({"probe": "q", "limit": "2"}, [598, 596]),
    ({"ok": "false", "limit": "2"}, [599, 597]),
    ({"outcome": "error", "limit": "1"}, [599]),
])
def test_pages(query: dict[str, str], want: list[int]) -> None:
    h = ProbeHistory(size=1000)
    for ts in range(600):
        h.add(result(ts, ok=ts % 2 == 0, probe="q" if ts % 2 == 0 else "p"))
    assert [r["ts"] for r in h.page(query)] == want


@pytest.mark.parametrize("query", [{"limit": "-1"}, {"offset": "x"}])
def test_bad_page_parameters_name_themselves(query: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=next(iter(query))):
        ProbeHistory().page(query)
