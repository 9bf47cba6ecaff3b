"""Baselines, counter/gauge series and the signals built from server windows and samples (injected times)."""

from __future__ import annotations

import pytest

from sloguard.diagnose.arrivals import ProbeLoad
from sloguard.diagnose.history import Baselines, Series
from sloguard.diagnose.prompts import MEAN_BASELINES, MIN_BASELINE_PREFILLS, PROMPT_SIGNALS, settled
from sloguard.diagnose.signals import engine_signals, gpu_signals, host_signals, index, record_engine, record_host
from sloguard.model import Histogram, ModelView, Sample, ServerView
from sloguard.windows.server import ServerWindows


def test_baseline_is_the_median_of_healthy_values_within_the_horizon() -> None:
    b = Baselines(horizon=100.0, min_points=3, adopt=0.0)  # every value settled at once (lag: next test)
    b.record(0.0, {"queue@0.95": 0.01})
    b.record(1.0, {"queue@0.95": 0.02})
    assert b.get("queue@0.95") is None  # not enough healthy evaluations yet
    b.record(2.0, {"queue@0.95": 5.0})  # one outlier cannot move a median of three much
    assert b.get("queue@0.95") == 0.02
    b.record(150.0, {"queue@0.95": 0.03})  # the first three are older than the horizon now
    assert b.get("queue@0.95") is None and b.all() == {}


def test_the_keys_named_as_means_take_the_mean_of_their_values() -> None:
    """A window's mean prompt is right-skewed: the median of such means reads below the mix's mean."""
    b = Baselines(horizon=100.0, min_points=3, adopt=0.0, means=MEAN_BASELINES)
    for t, v in enumerate((300.0, 320.0, 340.0, 900.0)):
        b.record(float(t), {"prompt_tokens_per_request": v, "prompt_tokens_p90": v})
    assert b.get("prompt_tokens_per_request") == pytest.approx(465.0)
    assert b.get("prompt_tokens_p90") == pytest.approx(330.0)  # not named: the median
    assert set(MEAN_BASELINES) < set(PROMPT_SIGNALS)


def test_a_baseline_rests_on_values_that_span_a_window() -> None:
    """Ten evaluations one second apart over a 20 s window are one window read ten times, not ten samples."""
    b = Baselines(horizon=600.0, min_span=20.0)
    for t in range(10):
        b.record(float(t), {"prompt_tokens_p90": 400.0})
    assert b.get("prompt_tokens_p90") is None and b.all() == {}
    b.record(20.0, {"prompt_tokens_p90": 500.0})
    assert b.get("prompt_tokens_p90") == 400.0  # the settled ones (t <= 13.3) do not span 20 s yet: all of them
    for t in (30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0):
        b.record(t, {"prompt_tokens_p90": 500.0})
    assert b.get("prompt_tokens_p90") == 400.0  # settled: t <= 26.7, eleven values spanning 20 s
    assert b.span("prompt_tokens_p90") == 20.0 and b.span("other") is None  # the values behind it, not all 40 s


def test_a_young_history_that_settled_too_little_uses_all_its_values() -> None:
    b = Baselines(horizon=600.0, min_span=20.0)
    for t in (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 22.0, 23.0):
        b.record(t, {"network@0.95": 0.005})
    assert b.get("network@0.95") == 0.005  # settled (t <= 15.3) spans 7 s: all ten, spanning 23 s


@pytest.mark.parametrize(("healthy_s", "faulted_s", "adopt", "expected"), [
    (40, 0, 150.0, 1.0),  # a healthy history: its median
    (40, 40, 150.0, 1.0),  # a fault as long as the healthy history: the last third (26.7 s) is not settled
    (40, 75, 150.0, 1.0),  # the benchmark's whole observation: settled up to 38 s after the fault began
    (40, 90, 150.0, 9.0),  # a level that lasted longer than a third of the history, and outnumbers: adopted
    (400, 100, 60.0, 1.0),  # a long history: only the newest `adopt` (60 s) is left out
    (400, 400, 60.0, 9.0),  # ... so a level that lasted long enough and outnumbers is the new normal
])
def test_a_new_level_is_adopted_only_once_it_has_lasted(healthy_s: int, faulted_s: int, adopt: float,
                                                         expected: float) -> None:
    """A fault that has not breached yet records 'healthy' values; it must not become the baseline at once."""
    b = Baselines(horizon=3600.0, min_span=20.0, adopt=adopt)
    for t in range(healthy_s + faulted_s):
        b.record(float(t), {"serving_cpu_cores": 1.0 if t < healthy_s else 9.0})
    assert b.get("serving_cpu_cores") == expected


@pytest.mark.parametrize(("values", "increase"), [
    ([1.0, 2.0, 4.0], 3.0),
    ([5.0, 7.0, 2.0, 3.0], 2.0 + 2.0 + 1.0),  # a counter that went down restarted: its new value counts
])
def test_series_increase_handles_resets(values: list[float], increase: float) -> None:
    s = Series(horizon=100.0)
    for i, v in enumerate(values):
        s.add("c", float(i), v)
    assert s.increase("c", 10.0, float(len(values) - 1)) == (increase, float(len(values) - 1))


def test_series_gauges() -> None:
    s = Series(horizon=100.0)
    for t, v in ((0.0, 1.0), (5.0, 3.0), (10.0, 8.0)):
        s.add("g", t, v)
    s.add("g", 10.0, 99.0)  # the same scrape twice is ignored
    assert s.mean("g", 4.0, 10.0) == 8.0 and s.mean("g", 7.0, 10.0) == 5.5 and s.max("g", 20.0, 10.0) == 8.0
    assert s.change("g", 4.0, 10.0) == 5.0  # from the value at the window start (t=5)
    assert s.rate("g", 100.0, 10.0) == pytest.approx(0.7) and s.mean("missing", 5.0, 10.0) is None


def _view(ts: float, finished: float, prompt: float, preempt: float, waiting: float, running: float,
          kv: float) -> ServerView:
    mv = ModelView("m", histograms={"queue": Histogram(((0.3, finished), (float("inf"), finished)), finished, 0.0)},
                   gauges={"requests_waiting": waiting, "requests_running": running, "kv_cache_usage_ratio": kv},
                   counters={"prompt_tokens": prompt, "preemptions": preempt}, finished_by_reason={"stop": finished})
    return ServerView("t", "vllm", ts, {"m": mv})


def test_engine_signals_over_the_window() -> None:
    server, series = ServerWindows(), Series(horizon=600.0)
    for i in range(11):  # 10 s: 2 requests/s of 100 prompt tokens, running grows 2 -> 12, 1 preemption/s
        server.add(_view(float(i), 2.0 * i, 200.0 * i + 100.0 * i, float(i), waiting=3.0, running=2.0 + i, kv=0.5))
        record_engine(series, server, "t")
    sig = engine_signals(series, server, "t", window=10.0, hold=60.0, now=10.0)
    # arrivals: 2 finished/s plus the running count's growth (1/s), not the 2/s that finish
    assert sig["request_rate"] == pytest.approx(3.0) and sig["preemptions_per_second"] == pytest.approx(1.0)
    assert sig["requests_waiting"] == 3.0 and sig["kv_cache_usage_ratio"] == 0.5
    # 300 prompt tokens/s counted, 2 finished/s plus the running count's growth (1/s): 100 tokens/request
    assert sig["prompt_tokens_per_request"] == pytest.approx(100.0)
    assert sig["engine_restarts"] == 0.0
    server.add(_view(11.0, 1.0, 10.0, 0.0, 0.0, 1.0, 0.1))  # every counter went back: a restart
    record_engine(series, server, "t")
    assert engine_signals(series, server, "t", 10.0, 60.0, 11.0)["engine_restarts"] == 1.0
    assert engine_signals(series, server, "other", 10.0, 60.0, 11.0) == {}  # nothing known: nothing claimed


def test_series_quantile_is_the_nearest_rank_of_the_window() -> None:
    s = Series(horizon=100.0)
    for t in range(20):
        s.add("kv", float(t), 0.1 if t < 16 else (0.95, 0.97, 0.6, 0.96)[t - 16])
    assert s.quantile("kv", 0.9, 20.0, 19.0) == 0.95 and s.quantile("kv", 1.0, 20.0, 19.0) == 0.97
    assert s.quantile("kv", 0.9, 2.0, 19.0) == 0.96 and s.quantile("missing", 0.9, 20.0, 19.0) is None


def test_kv_pressure_reads_the_window_p90_not_the_mean() -> None:
    """A cache that filled 4 s before the end of a 20 s window (one preemption dip): p90 0.95.

    The mean of the recent quarter (the last 5 scrapes, with the dip) is 0.72: under the 0.85 the rule needs.
    """
    server, series = ServerWindows(), Series(horizon=600.0)
    for i in range(20):
        kv = 0.1 if i < 16 else (0.95, 0.97, 0.6, 0.96)[i - 16]
        server.add(_view(float(i), 2.0 * i, 100.0 * i, 0.0, waiting=0.0, running=4.0, kv=kv))
        record_engine(series, server, "t")
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=19.0)
    assert sig["kv_cache_usage_ratio"] == pytest.approx(0.716) and sig["kv_cache_usage_p90"] == 0.95


def test_a_cache_that_just_ran_out_reads_full_at_its_recent_peak() -> None:
    """A cache full at the last 2 of 20 scrapes: p90 still 0.1 (a tenth of the window not yet full), peak 0.97."""
    server, series = ServerWindows(), Series(horizon=600.0)
    for i in range(20):
        kv = 0.1 if i < 18 else (0.97, 0.93)[i - 18]
        server.add(_view(float(i), 2.0 * i, 100.0 * i, 0.0 if i < 18 else float(i - 17), waiting=0.0, running=4.0,
                         kv=kv))
        record_engine(series, server, "t")
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=19.0)
    assert sig["kv_cache_usage_p90"] == 0.1 and sig["kv_cache_usage_peak"] == 0.97
    assert sig["preemptions_per_second"] > 0
    # an old peak, before the window's last quarter, is not a cache that ran out now
    for i in range(20, 26):
        server.add(_view(float(i), 2.0 * i, 100.0 * i, 2.0, waiting=0.0, running=4.0, kv=0.2))
        record_engine(series, server, "t")
    assert engine_signals(series, server, "t", window=20.0, hold=60.0, now=25.0)["kv_cache_usage_peak"] == 0.2


def _prompts(ts: float, short: int, long: int, scale: float = 1.0) -> ServerView:
    """Cumulative prompt-length histogram (vLLM buckets): `short` prompts of 128 tokens, `long` ones of 8000."""
    bounds = (50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, float("inf"))
    at = (128.0, 8000.0 * scale)
    counts = tuple((b, float(short * (at[0] <= b) + long * (at[1] <= b))) for b in bounds)
    h = Histogram(counts, float(short + long), short * at[0] + long * at[1])
    return ServerView("t", "vllm", ts, {"m": ModelView("m", histograms={"prompt_length": h}, gauges={},
                                                       counters={}, finished_by_reason={"stop": 0.0})})


@pytest.mark.parametrize(("short", "long", "p90_at_most", "p90_at_least"), [
    (57, 3, 200.0, 100.0),  # a burst: 3 long prompts of 60 move the mean 4x (521 tokens), the p90 not at all
    (45, 15, 10000.0, 5000.0),  # a shift: a quarter of the requests long, the p90 with them
])
def test_prompt_length_is_the_histogram_p90(short: int, long: int, p90_at_most: float, p90_at_least: float) -> None:
    server, series = ServerWindows(), Series(horizon=600.0)
    server.add(_prompts(0.0, 0, 0))
    server.add(_prompts(20.0, short, long))
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0)
    assert sig["prompt_tokens_per_request"] == pytest.approx((short * 128.0 + long * 8000.0) / (short + long))
    assert p90_at_least <= sig["prompt_tokens_p90"] <= p90_at_most


def test_host_signals_name_the_busiest_process() -> None:
    series = Series(horizon=600.0)
    for t in range(0, 21, 5):
        record_host(series, index([
            Sample("sloguard_process_cpu_seconds_total", {"process": "api", "mode": "user"}, 0.9 * t),
            Sample("sloguard_process_cpu_seconds_total", {"process": "api", "mode": "system"}, 0.1 * t),
            Sample("sloguard_process_cpu_seconds_total", {"process": "engine", "mode": "user"}, 0.2 * t),
            Sample("sloguard_server_cold_starts_total", {"process": "engine"}, 1.0 if t >= 15 else 0.0)]), float(t))
    sig, notes = host_signals(series, ["api", "engine"], window=20.0, hold=60.0, now=20.0)
    assert sig["serving_cpu_cores"] == pytest.approx(1.0) and notes["serving_cpu_cores"] == "process api"
    assert sig["cold_starts"] == 1.0 and notes["cold_starts"] == "process engine"
    assert host_signals(series, ["nope"], 20.0, 60.0, 20.0) == ({}, {})


@pytest.mark.parametrize(("points", "window", "now", "expected"), [
    ([(0, 0.0), (15, 1.5), (30, 3.0)], 75.0, 30.0, 0.1),
    ([(0, 0.0), (15, 1.5), (30, 15.0)], 75.0, 30.0, 0.9),  # the newest interval only
    ([(0, 0.0), (15, 9.0), (30, 1.5)], 75.0, 30.0, 0.1),  # a restart's reset counts from 0
    ([(0, 0.0), (15, 1.5)], 75.0, 30.0, 0.1),  # `now` after the newest read
    ([(0, 0.0), (15, 1.5)], 10.0, 30.0, None),  # the older point is outside the window
    ([(15, 1.5)], 75.0, 30.0, None),
    ([(0, 0.0), (15, 1.5), (30, 3.0)], 75.0, 20.0, 0.1),  # points after `now` are not read
])
def test_series_newest_rate(points: list[tuple[float, float]], window: float, now: float,
                            expected: float | None) -> None:
    s = Series(horizon=600.0)
    for ts, v in points:
        s.add("k", ts, v)
    got = s.newest_rate("k", window, now)
    assert got == (None if expected is None else pytest.approx(expected))


def test_serving_cpu_shows_a_pinned_process_at_its_first_read() -> None:
    """At the defaults (75 s quarter, 15 s reads) a process pinned at 0.9 cores from t=300 reads ≥ 0.35 at t=315.

    Over the quarter alone it read 0.12 (its mean with four calm reads) and passed 0.35 only at the third read.
    """
    series, cpu = Series(horizon=600.0), 0.0
    read: dict[int, float] = {}
    for t in range(0, 361, 15):
        cpu += 15 * (0.9 if t > 300 else 0.01)
        record_host(series, index([Sample("sloguard_process_cpu_seconds_total", {"process": "api", "mode": "user"},
                                          cpu)]), float(t))
        read[t] = host_signals(series, ["api"], window=300.0, hold=600.0, now=float(t))[0].get("serving_cpu_cores", -1)
    assert read[300] == pytest.approx(0.01)  # a steady level reads the same either way
    assert read[315] == pytest.approx(0.9) and read[360] == pytest.approx(0.9)
    assert series.rate("process/api/cpu", 75.0, 315.0) == pytest.approx(0.188)  # the quarter alone


def test_gpu_signals_without_any_gpu_series_are_not_available() -> None:
    assert gpu_signals(index([Sample("sloguard_probe_ttft_seconds_count", {}, 1.0)]), "t") == ({}, {})


def test_gpu_signals_from_nvml_series_and_the_canary() -> None:
    u = {"uuid": "GPU-1"}
    samples = [Sample("sloguard_gpu_clock_event_active", {**u, "reason": "sw_power_cap"}, 1.0),
               Sample("sloguard_gpu_clock_event_active", {**u, "reason": "gpu_idle"}, 0.0),
               Sample("sloguard_gpu_sm_clock_hertz", u, 1.2e9), Sample("sloguard_gpu_sm_clock_max_hertz", u, 2.0e9),
               Sample("sloguard_gpu_health_problem", {**u, "reason": "row_remap_pending"}, 1.0),
               Sample("sloguard_gpu_health_problem", {**u, "reason": "clocks_below_max"}, 0.0),
               Sample("sloguard_canary_degraded", {"device": "cuda:0", "gpu": "0"}, 0.0)]
    sig, notes = gpu_signals(index(samples), "any-target")  # node-local NVML GPUs serve every target
    assert sig == {"gpu_throttle_reasons": 1.0, "gpu_health_problems": 1.0, "gpu_sm_clock_ratio": 0.6,
                   "canary_degraded": 0.0}
    assert notes["gpu_health_problems"] == "GPU-1:row_remap_pending"


def test_a_queue_that_has_just_formed_reads_at_once() -> None:
    """Waiting is instantaneous state: read over the window's last quarter, a queue 5 s old reads 4, not 1."""
    server, series = ServerWindows(), Series(horizon=600.0)
    for i in range(21):
        server.add(_view(float(i), 2.0 * i, 100.0 * i, 0.0, waiting=4.0 if i > 15 else 0.0, running=4.0, kv=0.3))
        record_engine(series, server, "t")
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0)
    assert sig["requests_waiting"] == 4.0 and sig["requests_running"] == 4.0


def _prefills(ts: float, first: float, prompt: float, finished_128: float) -> ServerView:
    """`first` first tokens and `prompt` prompt tokens so far; the prompt-length histogram holds 128-token finishes."""
    bounds = (100.0, 200.0, 500.0, 1000.0, 2000.0, float("inf"))
    ttft = Histogram(((1.0, first), (float("inf"), first)), first, 0.2 * first)
    length = Histogram(tuple((b, finished_128 * (b >= 128.0)) for b in bounds), finished_128, 128.0 * finished_128)
    return ServerView("t", "vllm", ts, {"m": ModelView("m", histograms={"ttft": ttft, "prompt_length": length},
                                                       gauges={}, counters={"prompt_tokens": prompt},
                                                       finished_by_reason={"stop": finished_128})})


def test_prompt_length_is_what_the_engine_prefilled_not_what_finished() -> None:
    """Prompts got 8x longer 10 s into a 20 s window; none of the long ones has finished yet (decoding)."""
    server, series = ServerWindows(), Series(horizon=600.0)
    first = prompt = 0.0
    for t in range(21):
        server.add(_prefills(float(t), first, prompt, finished_128=3.0 * min(t, 10)))
        first, prompt = first + 3.0, prompt + 3.0 * (1024.0 if t >= 10 else 128.0)
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0)
    assert sig["prompt_tokens_per_request"] == pytest.approx((10 * 128.0 + 10 * 1024.0) / 20)
    assert sig["prompt_tokens_recent"] == pytest.approx(1024.0)  # the last half: 30 prefills, all long
    assert sig["prompt_tokens_p90"] <= 200.0  # the finishes are still the short prompts


def _shifted(users_prompt: float) -> tuple[ServerWindows, ProbeLoad]:
    """20 s: 1 user/s with `users_prompt`-token prompts and 2 probes/s of 128 tokens, prefilled as they come."""
    server, load = ServerWindows(), ProbeLoad(horizon=40.0)
    first = prompt = 0.0
    for t in range(21):
        server.add(_prefills(float(t), first, prompt, finished_128=0.0))
        first, prompt = first + 3.0, prompt + users_prompt + 2 * 128.0
    # each probe's result: its first token at t + 0.25 / t + 0.75 (wall time), reported with its prompt tokens
    load.observe([], now=20.0, prefilled=[("t", t + k, 128, "") for t in range(20) for k in (0.25, 0.75)])
    return server, load


@pytest.mark.parametrize("users_prompt", [422.0, 1688.0])
def test_prompt_length_is_the_users_without_the_probes(users_prompt: float) -> None:
    """2 probes/s of 128 tokens beside 1 user/s dilute a 4x shift of the users' prompts to 2.9x; taken out: 4x."""
    server, load = _shifted(users_prompt)
    plain = engine_signals(Series(600.0), server, "t", window=20.0, hold=60.0, now=20.0)
    users = engine_signals(Series(600.0), server, "t", window=20.0, hold=60.0, now=20.0, probes=load)
    assert plain["prompt_tokens_per_request"] == pytest.approx((users_prompt + 256.0) / 3)
    assert users["prompt_tokens_per_request"] == pytest.approx(users_prompt)
    assert users["prompt_tokens_recent"] == users["prompt_tokens_per_request"]  # 10 users' prefills per half: none


def test_probes_in_flight_and_cut_short_are_not_the_users() -> None:
    """Probes whose results are not back, or came back cut short without usage, still leave the users' mean."""
    server, _ = _shifted(1688.0)
    load = ProbeLoad(horizon=40.0)
    keys = [(f"{t}/{k}", t + k) for t in range(20) for k in (0.25, 0.75)]
    load.observe([], now=20.0, live=[("t", key, ts, 128) for key, ts in keys])  # every first token as it came
    # a third came back counted, a third cut short (no usage chunk), the rest still streaming at t = 20
    load.observe([], now=20.0, prefilled=[("t", ts, 128 if i % 3 == 0 else None, key)
                                          for i, (key, ts) in enumerate(keys) if i % 3 < 2])
    users = engine_signals(Series(600.0), server, "t", window=20.0, hold=60.0, now=20.0, probes=load)
    assert users["prompt_tokens_per_request"] == pytest.approx(1688.0)


@pytest.mark.parametrize(("users_per_s", "shift_at", "recent"), [
    (4, 35, 1600.0),  # the last eighth (5 s): 20 users' prefills, all 4x
    (3, 35, (15 * 1600.0 + 15 * 400.0) / 30),  # 15 in the eighth are too few: the quarter, half of them 4x
    (4, 30, 1600.0),  # a shift that filled the quarter shows in the eighth too
    (1, 30, (10 * 1600.0 + 10 * 400.0) / 20),  # 1 user/s: the half's 20 prefills count, the quarter's 10 do not
    (1, 35, (5 * 1600.0 + 15 * 400.0) / 20),
    (4, 50, 400.0),  # no shift: every span reads the usual prompts
])
def test_recent_prompts_are_the_users_mean_over_the_span_a_shift_filled(users_per_s: int, shift_at: int,
                                                                        recent: float) -> None:
    """40 s window: users' prompts 400 → 1600 tokens at `shift_at`, beside 2 probes/s of 128 tokens."""
    server, load = ServerWindows(), ProbeLoad(horizon=80.0)
    first = prompt = 0.0
    for t in range(41):
        server.add(_prefills(float(t), first, prompt, finished_128=0.0))
        first += users_per_s + 2.0
        prompt += users_per_s * (1600.0 if t >= shift_at else 400.0) + 2 * 128.0
    load.observe([], now=40.0, prefilled=[("t", t + k, 128, "") for t in range(40) for k in (0.25, 0.75)])
    sig = engine_signals(Series(600.0), server, "t", window=40.0, hold=60.0, now=40.0, probes=load)
    assert sig["prompt_tokens_recent"] == pytest.approx(recent)
    assert sig["prompt_tokens_per_request"] <= sig["prompt_tokens_recent"]


def test_no_users_prompt_mean_from_a_few_of_their_prefills() -> None:
    """Only probes (and 4 users' prefills): not available, never the probes' mean in the users' place."""
    server, load = ServerWindows(), ProbeLoad(horizon=40.0)
    for t in range(21):
        server.add(_prefills(float(t), 2.0 * t + min(t, 4), 256.0 * t + 1000.0 * min(t, 4), finished_128=0.0))
    load.observe([], now=20.0, prefilled=[("t", t + k, 128, "") for t in range(20) for k in (0.25, 0.75)])
    sig = engine_signals(Series(600.0), server, "t", window=20.0, hold=60.0, now=20.0, probes=load)
    assert "prompt_tokens_per_request" not in sig and "prompt_tokens_p90" not in sig  # nothing finished either


def test_no_prompt_length_over_a_window_the_scrapes_do_not_cover_yet() -> None:
    """Right after start (10 s of scrapes, a 20 s window): a mean of its few prompts is not learned as a baseline."""
    server, load = _shifted(422.0)
    early = engine_signals(Series(600.0), server, "t", window=20.0, hold=60.0, now=10.0, probes=load)
    assert "prompt_tokens_per_request" not in early and "prompt_tokens_p90" not in early
    full = engine_signals(Series(600.0), server, "t", window=18.0, hold=60.0, now=18.0, probes=load)
    assert full["prompt_tokens_per_request"] == pytest.approx(422.0)


def _defaults_shift(shift_at: int) -> ServerWindows:
    """600 s of 15 s scrapes at 5 users/s, their prompts 400 → 1600 tokens from the scrape at `shift_at` on."""
    server = ServerWindows()
    first = prompt = 0.0
    for t in range(0, 601, 15):
        server.add(_prefills(float(t), first, prompt, finished_128=0.0))
        first, prompt = first + 75.0, prompt + 75.0 * (1600.0 if t >= shift_at else 400.0)
    return server


@pytest.mark.parametrize("late", [0.0, 3.0, 7.0, 14.9])
def test_recent_prompt_spans_end_at_the_newest_scrape_whatever_the_evaluations_phase(late: float) -> None:
    """The defaults: 300 s window, 15 s scrapes, 5 users/s; prompts 400 → 1600 tokens 30 s before the last scrape.

    The sixteenth (18.75 s) is two scrape intervals back from the newest scrape, all of them the new prompts, at
    every phase; ending at `now` it covered one interval (under FULL, left out) once the evaluation came ≥ 3.75 s
    after the scrape, and the eighth's 45 s read 1200.
    """
    sig = engine_signals(Series(600.0), _defaults_shift(570), "t", window=300.0, hold=600.0, now=600.0 + late)
    assert sig["prompt_tokens_recent"] == pytest.approx(1600.0)
    assert sig["prompt_tokens_per_request"] == pytest.approx((18 * 400.0 + 2 * 1600.0) / 20)


@pytest.mark.parametrize("late", [0.0, 7.0, 14.9])
def test_recent_prompts_read_a_shift_one_scrape_interval_old(late: float) -> None:
    """The defaults at 5 users/s: prompts 400 → 1600 tokens over the last scrape interval only (75 prefills).

    The thirty-second (9.4 s) is that one interval back from the newest scrape: 4x; the sixteenth's 30 s read
    2.5x (half of them old), under long_prompts' 3x (benchmarks/diagnosis_defaults.py, 5 users/s: a 4x shift read
    2.9-3.0x over the sixteenth for three evaluations while the queue grew).
    """
    sig = engine_signals(Series(600.0), _defaults_shift(585), "t", window=300.0, hold=600.0, now=600.0 + late)
    assert sig["prompt_tokens_recent"] == pytest.approx(1600.0)


def test_no_prompt_length_from_a_target_whose_scrapes_stopped() -> None:
    """The newest scrape 100 s old in a 300 s window: a stopped target's old prompts do not read as now."""
    server = ServerWindows()
    first = prompt = 0.0
    for t in range(0, 601, 15):
        server.add(_prefills(float(t), first, prompt, finished_128=0.0))
        first, prompt = first + 75.0, prompt + 75.0 * 400.0
    assert "prompt_tokens_per_request" in engine_signals(Series(600.0), server, "t", window=300.0, hold=600.0,
                                                         now=629.0)
    stale = engine_signals(Series(600.0), server, "t", window=300.0, hold=600.0, now=700.0)
    assert "prompt_tokens_per_request" not in stale and "prompt_tokens_recent" not in stale


LEARNED = {"user_request_rate": 1.0, "request_rate": 3.0, "prompt_tokens_per_request": 200.0,
           "prompt_tokens_recent": 210.0, "prompt_tokens_p90": 300.0, "requests_running": 4.0}


@pytest.mark.parametrize(("learned", "span", "window", "kept"), [
    # 1 user/s: 27 s of values + a 20 s window = 47 prefills (the benchmark at injection after a 60 s warm-up)
    (LEARNED, 27.0, 20.0, False),
    (LEARNED, 80.0, 20.0, True),  # 100 prefills: counted
    (LEARNED, 79.0, 20.0, False),
    # the defaults (300 s window, 300 s span) at 0.1 user/s: 60 prefills; at 2/s: 1,200
    ({**LEARNED, "user_request_rate": 0.1}, 300.0, 300.0, False),
    ({**LEARNED, "user_request_rate": 2.0}, 300.0, 300.0, True),
    # the users' rate not learned: all requests' rate (probes too) counts them, generously
    ({k: v for k, v in LEARNED.items() if k != "user_request_rate"}, 27.0, 20.0, True),
    # no rate at all: the count is unknown, the baselines stay
    ({k: v for k, v in LEARNED.items() if "rate" not in k}, 5.0, 20.0, True),
])
def test_a_prompt_baseline_counts_once_it_rests_on_enough_prefills(learned: dict[str, float], span: float,
                                                                   window: float, kept: bool) -> None:
    spans = {k: span for k in PROMPT_SIGNALS}
    got, why = settled(learned, spans, window)
    assert all((k in got) == kept for k in PROMPT_SIGNALS)
    assert got["requests_running"] == 4.0  # other signals' baselines are never withheld
    assert set(why) == (set() if kept else set(PROMPT_SIGNALS))
    assert all(f"{MIN_BASELINE_PREFILLS} needed" in w for w in why.values())


def test_a_withheld_prompt_baseline_cannot_show_a_rise() -> None:
    """The users' first 40 s drew short prompts: their usual prompts then read 2.5x a young baseline."""
    from sloguard.diagnose.engine import apply
    from sloguard.diagnose.model import Inputs
    from sloguard.diagnose.rules import RULES

    sig = {"prompt_tokens_per_request": 500.0, "prompt_tokens_recent": 520.0, "prompt_tokens_p90": 1100.0,
           "kv_cache_usage_p90": 0.1}
    young, _ = settled(LEARNED, dict.fromkeys(PROMPT_SIGNALS, 27.0), 20.0)
    old, _ = settled(LEARNED, dict.fromkeys(PROMPT_SIGNALS, 120.0), 20.0)
    long_rows = [r for r in RULES if r.cause == "long_prompts"]
    assert not any(apply(r, Inputs("s", 0.0, 20.0, (), {}, sig, young))[0] for r in long_rows)
    assert any(apply(r, Inputs("s", 0.0, 20.0, (), {}, sig, old))[0] for r in long_rows)


def _queued(ts: float, finished: float, queued_s: float, waiting: float) -> ServerView:
    """A scrape whose queue-time histogram holds `finished` requests that queued `queued_s` seconds in all."""
    mv = ModelView("m", histograms={"queue": Histogram(((0.3, finished), (float("inf"), finished)), finished,
                                                       queued_s)},
                   gauges={"requests_waiting": waiting, "requests_running": 1.0, "kv_cache_usage_ratio": 0.5},
                   counters={"prompt_tokens": 100.0 * finished}, finished_by_reason={"stop": finished})
    return ServerView("t", "vllm", ts, {"m": mv})


def test_a_queue_between_scrapes_reads_in_the_engines_queue_time() -> None:
    """No scrape sees a request waiting; from t=15 the engine records 1.5 s queued per second (Little's law)."""
    server, series = ServerWindows(), Series(horizon=600.0)
    for i in range(21):
        server.add(_queued(float(i), float(i), 1.5 * max(0, i - 15), waiting=0.0))
        record_engine(series, server, "t")
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0)
    assert sig["requests_waiting"] == 0.0 and sig["requests_waiting_peak"] == 0.0
    # the last quarter (5 s: the scrapes at 15..20) queued 7.5 s: 1.5 waiting on average
    assert sig["queue_seconds_per_second"] == pytest.approx(1.5)
    assert engine_signals(series, server, "t", window=20.0, hold=60.0, now=14.0)["queue_seconds_per_second"] == 0.0


def test_the_waiting_peak_is_the_most_seen_at_one_recent_scrape() -> None:
    server, series = ServerWindows(), Series(horizon=600.0)
    for i in range(21):
        server.add(_queued(float(i), float(i), 0.0, waiting=3.0 if i == 17 else 9.0 if i == 5 else 0.0))
        record_engine(series, server, "t")
    sig = engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0)
    assert sig["requests_waiting_peak"] == 3.0  # the 9 at t=5 is older than the window's last quarter
    assert sig["requests_waiting"] == pytest.approx(3.0 / 5)  # the mean of the quarter (16..20]: five scrapes


def test_a_queue_sum_that_falls_without_a_reset_reads_as_no_queue() -> None:
    server, series = ServerWindows(), Series(horizon=600.0)
    for i in range(21):  # the count keeps growing (no reset) while the sum goes down: a broken page
        server.add(_queued(float(i), float(i), 100.0 - i, waiting=0.0))
        record_engine(series, server, "t")
    assert engine_signals(series, server, "t", window=20.0, hold=60.0, now=20.0)["queue_seconds_per_second"] == 0.0


def test_no_queue_time_from_an_engine_without_its_histogram() -> None:
    server, series = ServerWindows(), Series(horizon=600.0)
    for i in range(5):
        server.add(_prefills(float(i), float(i), 100.0 * i, float(i)))
        record_engine(series, server, "t")
    assert "queue_seconds_per_second" not in engine_signals(series, server, "t", window=4.0, hold=60.0, now=4.0)
