"""The raw ring keeps the newest rows and evicts in chunks; the bucket ring snaps and expires."""

from __future__ import annotations

import numpy as np
import pytest

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


@pytest.mark.parametrize(
    ("batches", "moved"),
    [
        ([[1.0, 2.0], [3.0, 4.0]], False),  # in order: appended, nothing moves
        ([[1.0, 5.0], [3.0]], True),  # a late row falls inside the held rows
        ([[4.0, 2.0, 3.0], [1.0, 1.0]], True),  # unsorted batch, then rows older than everything held
    ],
)
def test_raw_ring_sorts_late_rows_and_reports_moves(batches: list[list[float]], moved: bool) -> None:
    ring = RawRing(2, cap=100, chunk=10)
    arrived: list[float] = []
    for batch in batches:
        version = ring.version
        ts = np.array(batch)
        ring.extend(Rows(ts, np.ones(ts.size, dtype=np.uint8), np.column_stack([ts * 10, np.full(ts.size, np.nan)])))
        arrived += batch
    assert (ring.version != version) is moved
    assert ring.ts.tolist() == sorted(arrived)
    assert ring.column(0, 0, len(ring)).tolist() == [t * 10 for t in sorted(arrived)]  # values follow their rows
    assert np.isnan(ring.column(1, 0, len(ring))).all()
    assert ring.nbytes % (8 + 2 + 8) == 0  # ts, flags and one column per row: the all-NaN column is not stored
    assert ring.index(2.5) == sum(t <= 2.5 for t in arrived)


def test_bucket_summary_matches_select_and_refreshes_on_change() -> None:
    ring = BucketRing(1, width=10.0)
    ts = np.array([1.0, 2.0, 15.0, 25.0, 26.0])
    ring.add(Rows(ts, np.array([1, 3, 1, 0, 3], dtype=np.uint8), np.arange(1.0, 6.0).reshape(5, 1)))
    for start, end in [(0.0, 30.0), (6.0, 30.0), (6.0, 14.0), (40.0, 50.0)]:
        summary, buckets = ring.summary(start, end), ring.select(start, end)
        assert summary.total == sum(b.total for b in buckets)
        assert summary.count(2) == sum(b.count(2) for b in buckets)
        assert summary.sketch(0).count == sum(b.sketches[0].count for b in buckets)
    first = ring.summary(0.0, 30.0)
    assert ring.summary(0.0, 30.0) is first  # cached
    ring.add(Rows(np.array([3.0]), np.array([1], dtype=np.uint8), np.array([[7.0]])))  # a late row
    assert ring.summary(0.0, 30.0).total == first.total + 1
