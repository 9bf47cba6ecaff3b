"""The raw ring keeps the newest rows and evicts in chunks; the bucket ring snaps and expires."""

from __future__ import annotations

import numpy as np

from sloguard.windows.rolling import BucketRing, RawRing, Rows


def test_raw_ring_keeps_at_least_cap_newest_rows() -> None:
    ring = RawRing(1, cap=10, chunk=4)
    evicted: list[float] = []
    for i in range(40):
        out = ring.append(float(i), 1, np.array([float(i)]))
        if out is not None:
            evicted += out.ts.tolist()
        assert len(ring) >= min(i + 1, 10)
        assert len(ring) <= 14
    kept = ring.rows().ts.tolist()
    assert evicted + kept == [float(i) for i in range(40)]


def test_raw_ring_drop_before() -> None:
    ring = RawRing(1, cap=100, chunk=10)
    for i in range(10):
        ring.append(float(i), 0, np.array([0.0]))
    ring.drop_before(4.0)
    assert ring.rows().ts.tolist() == [5.0, 6.0, 7.0, 8.0, 9.0]
    ring.drop_before(100.0)
    assert len(ring) == 0


def test_bucket_ring_counts_select_and_expire() -> None:
    ring = BucketRing(1, width=10.0)
    ts = np.array([1.0, 2.0, 15.0, 25.0, 26.0])
    ring.add(Rows(ts, np.array([1, 3, 1, 0, 3], dtype=np.uint8), np.arange(5.0).reshape(5, 1)))
    assert ring.newest_ts == 26.0
    assert [b.total for b in ring.select(0.0, 30.0)] == [2, 1, 2]
    assert [b.total for b in ring.select(6.0, 30.0)] == [1, 2]  # the first bucket's midpoint 5 is out
    assert ring.select(0.0, 30.0)[0].flag_counts == {1: 1, 3: 1}
    ring.drop_before(20.0)
    assert [b.total for b in ring.select(0.0, 30.0)] == [2]
