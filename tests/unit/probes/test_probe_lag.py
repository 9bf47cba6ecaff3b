"""BusyMeter: buckets, the time-weighted wait quantile against brute force, and a real loop's stall."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from sloguard.probes.lag import NBUCKETS, BusyMeter, bucket, lower_us, wait_quantile


@pytest.mark.parametrize("us", [0, 1, 7, 8, 15, 16, 17, 100, 1000, 12345, 10**6, 10**9])
def test_bucket_bounds(us: int) -> None:
    b = bucket(us)
    assert lower_us(b) <= us < (lower_us(b + 1) if b + 1 < NBUCKETS else us + 1)
    assert lower_us(b + 1) <= lower_us(b) * (1 + 1 / 8) + 1  # 8 buckets per octave


def brute(periods_ns: list[int], span_ns: int, q: float) -> float:
    lo, hi = 0.0, float(max(periods_ns))
    for _ in range(100):
        mid = (lo + hi) / 2
        if sum(max(0, b - mid) for b in periods_ns) > (1 - q) * span_ns:
            lo = mid
        else:
            hi = mid
    return hi


@pytest.mark.parametrize("seed", range(5))
def test_wait_quantile_matches_brute_force_within_a_bucket(seed: int) -> None:
    rng = random.Random(seed)
    periods = [rng.randrange(1_000, 50_000) for _ in range(2000)] + [rng.randrange(10**6, 10**8) for _ in range(20)]
    span = sum(periods) * 3
    counts, sums = [0] * NBUCKETS, [0] * NBUCKETS
    for p in periods:
        counts[bucket(p // 1000)] += 1
        sums[bucket(p // 1000)] += p
    want = brute(periods, span, 0.99)
    assert wait_quantile(counts, sums, span, 0.99) == pytest.approx(want, rel=0.13)  # one bucket is 1/8 octave


def test_idle_loop_reports_no_wait_and_a_stall_shows() -> None:
    clock = [0]
    meter = BusyMeter(clock=lambda: clock[0])
    for _ in range(1000):  # 1 s of 50 us callbacks between 950 us polls
        clock[0] += 1_000_000
        meter.busy(50_000)
    assert meter.report()[0] < 50e-6
    meter.busy(100_000_000)  # one 100 ms stall
    clock[0] += 100_000_000
    p99, worst = meter.report()
    assert worst == pytest.approx(0.1) and p99 > 0.05  # 100 ms of 1.1 s: well over 1 % of the time


def test_installed_on_a_real_loop_sees_a_blocking_call() -> None:
    meter = BusyMeter()

    async def main() -> None:
        meter.install(asyncio.get_running_loop())
        await asyncio.sleep(0.01)
        time.sleep(0.05)  # the loop is blocked: any arrival now waits
        await asyncio.sleep(0.01)

    asyncio.run(main())
    assert meter.report()[1] >= 0.05
