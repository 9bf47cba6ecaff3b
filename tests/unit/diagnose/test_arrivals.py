"""sloguard's own probes taken out of the users' arrivals, and a surge told by its Poisson significance."""

from __future__ import annotations

import math

import pytest

from sloguard.diagnose.arrivals import ProbeLoad, arrival_surge_z
from sloguard.diagnose.history import Series
from sloguard.diagnose.signals import engine_signals, record_engine
from sloguard.model import ModelView, ServerView
from sloguard.windows.server import ServerWindows


def test_starts_by_their_own_times() -> None:
    load = ProbeLoad(horizon=20.0)
    load.observe([("t", 1.0), ("t", 5.0), ("t", 19.5), ("u", 6.0)], now=19.6)
    assert load.starts("t", 10.0, 20.0) == 1  # 19.5 only: 1.0 and 5.0 started before the window
    assert load.starts("t", 20.0, 20.0) == 3 and load.starts("u", 20.0, 20.0) == 1
    load.observe([], now=30.0)  # over the horizon: forgotten
    assert load.starts("t", 30.0, 30.0) == 1  # pruned at 10
    load.forget(["u"])
    assert load.starts("t", 20.0, 30.0) == 0 and load.starts("u", 30.0, 30.0) == 0


def test_prefills_by_their_first_tokens_out_of_order() -> None:
    """Results come back as each probe finishes: a later first token may arrive first."""
    load = ProbeLoad(horizon=20.0)
    load.observe([], now=10.0, prefilled=[("t", 9.0, 128, "a"), ("t", 2.0, 512, "b"), ("u", 9.5, 64, "")])
    load.observe([], now=12.0, prefilled=[("t", 8.5, 128, "")])
    assert load.prefills("t", 5.0, 12.0) == (2, 256) and load.prefills("t", 20.0, 12.0) == (3, 768)
    load.observe([], now=25.0)  # 2.0 is over the horizon: forgotten
    assert load.prefills("t", 30.0, 25.0) == (2, 256)
    load.forget(["t"])
    assert load.prefills("u", 30.0, 25.0) == (0, 0)


def test_prefills_as_their_first_tokens_come() -> None:
    """A first token counts at once with its nominal tokens; the result's server count replaces it."""
    load = ProbeLoad(horizon=20.0)
    load.observe([], now=5.0, live=[("t", "a", 4.0, 128)])
    assert load.prefills("t", 5.0, 5.0) == (1, 128)  # in flight: its result is seconds away
    load.observe([], now=8.0, prefilled=[("t", 4.01, 141, "a")])
    assert load.prefills("t", 5.0, 8.0) == (1, 141)  # the server's count: one prefill, not two
    load.observe([], now=9.0, live=[("t", "b", 9.0, 128), ("t", "c", 9.0, 512)])
    assert load.prefills("t", 1.0, 9.0) == (2, 141 + 512)  # a's offset (+13) for 128 only: 512 never seen
    load.observe([], now=14.0, prefilled=[("t", 9.0, None, "b")])  # cut short: no usage chunk came
    assert load.prefills("t", 10.0, 14.0) == (3, 141 + 141 + 512)  # the engine counted b's prefill all the same


def test_results_never_seen_live() -> None:
    """Without a first-token report (an abort check, an older probe process) a counted result still counts."""
    load = ProbeLoad(horizon=20.0)
    load.observe([], now=5.0, prefilled=[("t", 4.0, 128, "x"), ("t", 4.5, None, "y"), ("t", None, 64, "z")])
    assert load.prefills("t", 5.0, 5.0) == (1, 128)  # y and z: no count or no first token, nothing to take out
    load.observe([], now=30.0, live=[("t", "late", 29.0, 128)])
    assert load.prefills("t", 30.0, 30.0) == (1, 128)  # x forgotten over the horizon


@pytest.mark.parametrize("counts, rate, z", [
    ([], 1.0, 0.0),  # nothing measured: no surge
    ([(5.0, 5.0), (10.0, 10.0), (20.0, 20.0)], 1.0, 0.0),  # exactly the baseline
    ([(15.0, 5.0), (20.0, 10.0), (30.0, 20.0)], 1.0, 10 / math.sqrt(5)),  # 3x over 5 s: the quarter is most significant
    ([(6.0, 5.0), (14.0, 10.0), (34.0, 20.0)], 1.0, 14 / math.sqrt(20)),  # a slower rise: the whole window
    ([(2.0, 5.0), (4.0, 10.0), (9.0, 20.0)], 1.0, 0.0),  # fewer than usual: never negative evidence of a surge
    ([(2.0, 5.0)], 0.0, 2.0),  # from no users at all: sd of at least one request, 2 requests are not 4 sd
    ([(2200.0, 20.0)], 100.0, 200 / math.sqrt(2000)),  # +10% at 100/s over 20 s: as significant as 3x at 1/s
])
def test_arrival_surge_z(counts: list[tuple[float, float]], rate: float, z: float) -> None:
    assert arrival_surge_z(counts, rate) == pytest.approx(z)


@pytest.mark.parametrize("learned_over, z", [
    (math.inf, 10 / math.sqrt(20)),
    (600.0, 10 / math.sqrt(20 + 400 / 600)),  # a 10 min baseline: nearly exact
    (40.0, 10 / math.sqrt(20 + 400 / 40)),  # a 40 s warm-up's rate is itself ±16%: 30 over 20 s is less of a surge
])
def test_a_baseline_learned_over_a_short_time_is_uncertain_too(learned_over: float, z: float) -> None:
    assert arrival_surge_z([(30.0, 20.0)], 1.0, learned_over) == pytest.approx(z)


EXACT = (1.0, math.inf)  # a users' rate of 1/s, learned over a long time


def _view(ts: float, finished: float, running: float = 0.0) -> ServerView:
    mv = ModelView("m", histograms={}, gauges={"requests_running": running, "requests_waiting": 0.0},
                   counters={}, finished_by_reason={"stop": finished})
    return ServerView("t", "vllm", ts, {"m": mv})


def _feed(per_second: list[float], probes_per_second: int = 2) -> tuple[ServerWindows, Series, ProbeLoad]:
    """Scrape once a second; the engine finishes users' and probes' requests as they arrive."""
    server, series, load = ServerWindows(), Series(horizon=600.0), ProbeLoad(horizon=40.0)
    total = 0.0
    for i, users in enumerate(per_second):
        total += users + (probes_per_second if i else 0)
        server.add(_view(float(i), total))
        record_engine(series, server, "t")
    load.observe([("t", i - 1 + (k + 0.5) / probes_per_second) for i in range(1, len(per_second))
                  for k in range(probes_per_second)], now=len(per_second) - 1.0)
    return server, series, load


def test_the_users_arrivals_without_the_probes_and_their_surge() -> None:
    """1 user request/s and 2 probes/s for 20 s, then 3 users/s for 5 s: the total moves 1.2x, the users 4.5 sd."""
    server, series, load = _feed([1.0] * 21)
    plain = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0)
    users = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0, probes=load, user_rate=EXACT)
    assert plain["request_rate"] == pytest.approx(3.0) and "user_request_rate" not in plain
    assert users["request_rate"] == pytest.approx(3.0) and users["user_request_rate"] == pytest.approx(1.0)
    assert users["arrival_surge_z"] == pytest.approx(0.0)
    server, series, load = _feed([1.0] * 21 + [3.0] * 5)
    surge = engine_signals(series, server, "t", window=20.0, hold=60.0, now=25.0, probes=load, user_rate=EXACT)
    assert surge["request_rate"] == pytest.approx(3.5)  # (15 + 10 + 45) / 20: 1.17x the total's 3/s
    assert surge["arrival_surge_z"] == pytest.approx(10 / math.sqrt(5))


def test_no_users_rate_over_a_window_the_scrapes_do_not_cover_yet() -> None:
    """Right after start (10 s of scrapes, a 20 s window): a rate over a partial window is not learned."""
    server, series, load = _feed([1.0] * 11)
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=10.0, probes=load, user_rate=(1.0, 60.0))
    assert "user_request_rate" not in sig and "arrival_surge_z" not in sig and sig["request_rate"] == pytest.approx(3.0)


def test_no_surge_z_before_the_users_rate_has_a_baseline() -> None:
    server, series, load = _feed([1.0] * 21)
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0, probes=load)
    assert sig["user_request_rate"] == pytest.approx(1.0) and "arrival_surge_z" not in sig


def test_a_growing_batch_is_arrivals_and_a_preemption_is_not() -> None:
    """Requests admitted but not finished count as arrived; one moved from running to waiting does not."""
    server, series, load = ServerWindows(), Series(horizon=600.0), ProbeLoad(horizon=40.0)
    for i in range(21):
        mv = ModelView("m", histograms={}, gauges={"requests_running": float(min(i, 10)) - (3 if i == 20 else 0),
                                                   "requests_waiting": 3.0 if i == 20 else 0.0},
                       counters={}, finished_by_reason={"stop": 0.0})
        server.add(ServerView("t", "vllm", float(i), {"m": mv}))
        record_engine(series, server, "t")
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0, probes=load, user_rate=(0.5, math.inf))
    assert sig["user_request_rate"] == pytest.approx(0.5)  # 10 admitted in 20 s; the 3 preempted are not new
    assert "prompt_tokens_per_request" not in sig


def test_counters_and_gauges_between_the_same_two_scrapes() -> None:
    """The gauges are remembered at evaluations, which may miss the newest scrape: the arrivals use their scrapes."""
    server, series = ServerWindows(), Series(horizon=600.0)
    for i in range(21):  # nothing finishes; 1 user and 2 probe requests join the batch every second
        server.add(_view(float(i), 0.0, running=3.0 * i))
        if i < 20:  # the evaluation ran before the scrape at 20 arrived
            record_engine(series, server, "t")
    load = ProbeLoad(horizon=40.0)
    load.observe([("t", i - 1 + k / 2) for i in range(1, 21) for k in (0, 1)], now=20.5)
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.5, probes=load, user_rate=EXACT)
    assert sig["request_rate"] == pytest.approx(3.0) and sig["user_request_rate"] == pytest.approx(1.0)



@pytest.mark.parametrize("late", [0.0, 5.0, 10.0, 14.9])
def test_surge_spans_reach_back_from_the_newest_scrape_whatever_the_evaluations_phase(late: float) -> None:
    """A 160 s window scraped every 15 s: its quarter (40 s) is no whole number of scrapes. 1 user/s, 4/s for the
    last 30 s. From the newest scrape the quarter spans 45 s at every phase; from `now` it spanned 30 s (under FULL,
    left out) once the evaluation came ≥ 10 s after the scrape, and the half's diluted 10.4 sd was the largest."""
    server, series, total = ServerWindows(), Series(horizon=600.0), 0.0
    for t in range(0, 301, 15):
        server.add(_view(float(t), total))
        record_engine(series, server, "t")
        total += 15.0 * (4.0 if t >= 270 else 1.0)
    sig = engine_signals(series, server, "t", window=160.0, hold=60.0, now=300.0 + late, probes=ProbeLoad(40.0),
                         user_rate=EXACT)
    assert sig["arrival_surge_z"] == pytest.approx((135.0 - 45.0) / math.sqrt(45.0))


def test_no_users_rate_from_a_target_whose_scrapes_stopped() -> None:
    """The newest scrape 100 s old in a 300 s window: a stopped target's old arrivals do not read as now."""
    server, series, total = ServerWindows(), Series(horizon=900.0), 0.0
    for t in range(0, 601, 15):
        server.add(_view(float(t), total))
        record_engine(series, server, "t")
        total += 15.0
    sig = engine_signals(series, server, "t", window=300.0, hold=60.0, now=700.0, probes=ProbeLoad(40.0),
                         user_rate=EXACT)
    assert "user_request_rate" not in sig and "arrival_surge_z" not in sig
