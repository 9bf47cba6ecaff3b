"""sloguard's own probe traffic taken out of the users' arrivals and prompt lengths (injected times)."""

from __future__ import annotations

import pytest

from sloguard.diagnose.history import Series
from sloguard.diagnose.probeload import ProbeLoad, without
from sloguard.diagnose.signals import engine_signals, record_engine
from sloguard.model import Histogram, ModelView, ProbeResult, ServerView
from sloguard.windows.server import ServerWindows


def result(ts: float, prompt: int | None = 10, ttft: float | None = 0.1, e2e: float = 0.5, status: int | None = 200,
           kind: str = "") -> ProbeResult:
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=status == 200, status_code=status,
                       ttft_s=ttft, e2e_s=e2e, elapsed_s=e2e, prompt_tokens=prompt, check_kind=kind)


def test_starts_prefills_and_finishes_by_their_own_times() -> None:
    load = ProbeLoad(horizon=20.0)
    load.observe([("t", 1.0), ("t", 5.0), ("t", 19.5), ("u", 6.0)], [result(1.0), result(5.0, prompt=30)], now=19.6)
    assert load.starts("t", 10.0, 20.0) == 1  # 19.5 only: 1.0 and 5.0 started before the window
    assert load.starts("t", 20.0, 20.0) == 3 and load.starts("u", 20.0, 20.0) == 1
    assert load.prefilled("t", 16.0, 20.0) == (1, 30.0)  # first token at 5.1 (1.1 is outside)
    assert load.finished("t", 20.0, 20.0) == [10, 30]
    load.observe([], [], now=30.0)  # over the horizon: forgotten
    assert load.starts("t", 20.0, 30.0) == 1 and load.finished("t", 30.0, 30.0) == []  # pruned at 10
    load.forget(["u"])
    assert load.starts("t", 20.0, 30.0) == 0


@pytest.mark.parametrize("res, prefilled, finished", [
    (result(1.0, prompt=None), None, None),  # the response did not say: nothing is subtracted
    (result(1.0, ttft=None), (0, 0.0), [10]),  # no first token: never counted as prefilled
    (result(1.0, status=None), (0, 0.0), []),  # never reached the engine
    (result(1.0, kind="abort"), (0, 0.0), []),  # a guardrail check's result (its start still counts)
])
def test_what_counts_as_the_probes_own_prompt(res: ProbeResult, prefilled: tuple[int, float] | None,
                                               finished: list[int] | None) -> None:
    load = ProbeLoad(horizon=20.0)
    load.observe([], [res], now=2.0)
    assert load.prefilled("t", 20.0, 5.0) == prefilled and load.finished("t", 20.0, 5.0) == finished


H = Histogram(((100.0, 6.0), (1000.0, 8.0), (float("inf"), 10.0)), 10.0, 6000.0)


@pytest.mark.parametrize("prompts, buckets, count, total", [
    ([], (6.0, 8.0, 10.0), 10.0, 6000.0),
    ([10, 10, 500], (4.0, 5.0, 7.0), 7.0, 5480.0),
    ([10] * 8, (0.0, 0.0, 2.0), 2.0, 5920.0),  # more probes than the bucket held (edges disagree): never < 0
])
def test_a_histogram_without_the_probes(prompts: list[int], buckets: tuple[float, ...], count: float,
                                        total: float) -> None:
    got = without(H, prompts)
    assert got is not None and tuple(c for _, c in got.buckets) == buckets
    assert (got.count, got.sum) == (count, total)


def test_a_histogram_of_probes_only_leaves_nothing() -> None:
    assert without(Histogram(((100.0, 2.0), (float("inf"), 2.0)), 2.0, 20.0), [10, 10]) is None


def _view(ts: float, finished: float, prompt: float, first: float) -> ServerView:
    ttft = Histogram(((0.1, first), (float("inf"), first)), first, 0.05 * first)
    mv = ModelView("m", histograms={"ttft": ttft}, gauges={"num_requests_running": 0.0, "num_requests_waiting": 0.0},
                   counters={"prompt_tokens": prompt}, finished_by_reason={"stop": finished})
    return ServerView("t", "vllm", ts, {"m": mv})


def test_the_users_arrivals_and_prompts_without_the_probes() -> None:
    """1 user request/s of 400 tokens and 2 probes/s of 10: the engine's mean is 140, the users' 400."""
    server, series, load = ServerWindows(), Series(horizon=600.0), ProbeLoad(horizon=20.0)
    for i in range(21):
        server.add(_view(float(i), 3.0 * i, 420.0 * i, 3.0 * i))
        record_engine(series, server, "t")
    starts = [("t", i + k / 2) for i in range(20) for k in (0, 1)]
    load.observe(starts, [result(ts - 0.1, ttft=0.1, e2e=0.1) for _, ts in starts], now=20.0)
    plain = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0)
    users = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0, probes=load)
    assert plain["request_rate"] == pytest.approx(3.0) and plain["prompt_tokens_per_request"] == pytest.approx(140.0)
    assert users["request_rate"] == pytest.approx(1.0, abs=0.06)
    assert users["prompt_tokens_per_request"] == pytest.approx(400.0, rel=0.05)


def test_a_window_of_probes_only_has_no_user_prompt_length() -> None:
    server, series, load = ServerWindows(), Series(horizon=600.0), ProbeLoad(horizon=20.0)
    for i in range(21):
        server.add(_view(float(i), 1.0 * i, 10.0 * i, 1.0 * i))
        record_engine(series, server, "t")
    starts = [("t", float(i)) for i in range(1, 21)]
    load.observe(starts, [result(ts - 0.1, ttft=0.1, e2e=0.1) for _, ts in starts], now=20.0)
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0, probes=load)
    assert "prompt_tokens_per_request" not in sig  # not available, not 0 and not the probes' own
    assert sig["request_rate"] == pytest.approx(0.0)
