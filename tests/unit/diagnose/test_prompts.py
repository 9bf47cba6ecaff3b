"""The users' own prompt lengths (the probes' taken out) and a shift to longer prompts told by its significance."""

from __future__ import annotations

import math

import pytest

from sloguard.diagnose.arrivals import ProbeLoad
from sloguard.diagnose.prompts import PromptBaseline, prompt_shift_z, second_moment, users
from sloguard.model import Histogram, ModelView, ServerView
from sloguard.windows.server import ServerWindows

INF = math.inf


@pytest.mark.parametrize("h, m2", [
    (Histogram(((100.0, 0.0), (INF, 0.0)), 0.0, 0.0), None),  # no observations
    # 4 at 50 and 3 at 300: each in the middle of its bucket, which the sum says
    (Histogram(((100.0, 4.0), (500.0, 7.0), (INF, 7.0)), 7.0, 1100.0), (4 * 50**2 + 3 * 300**2) / 7),
    # values at their buckets' upper bounds (vLLM's `le`): exact
    (Histogram(((100.0, 2.0), (1000.0, 3.0), (INF, 3.0)), 3.0, 1200.0), (2 * 100**2 + 1000**2) / 3),
    # one over the last bound sits at it: 2 at 50, 1 at 100 (a lower bound for it)
    (Histogram(((100.0, 2.0), (INF, 3.0)), 3.0, 200.0), (2 * 50**2 + 100**2) / 3),
    # a sum below every bucket's start (impossible, a reset mid-window): the positions clamp at the starts
    (Histogram(((100.0, 1.0), (500.0, 2.0), (INF, 2.0)), 2.0, 10.0), (0.0 + 100**2) / 2),
])
def test_second_moment(h: Histogram, m2: float | None) -> None:
    assert second_moment(h) == (None if m2 is None else pytest.approx(m2))


def test_second_moment_of_the_simulators_mix_in_vllms_buckets() -> None:
    """64/256/1024/2048 tokens at 40/35/20/5%: not one common position per bucket; the estimate is within 12%."""
    bounds = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, INF)
    mix = {64: 40, 256: 35, 1024: 20, 2048: 5}
    h = Histogram(tuple((b, float(sum(n for v, n in mix.items() if v <= b))) for b in bounds), 100.0,
                  float(sum(v * n for v, n in mix.items())))
    exact = sum(v * v * n for v, n in mix.items()) / 100
    got = second_moment(h)
    assert got is not None and abs(got / exact - 1) < 0.12


BASE = PromptBaseline(mean=400.0, second_moment=400.0**2 + 500.0**2)  # healthy: 400 tokens a request, sd 500


@pytest.mark.parametrize("spans, base, z", [
    ([], BASE, 0.0),  # nothing measured
    ([(2000.0, 5.0)], BASE, 0.0),  # exactly the baseline
    ([(8000.0, 5.0)], BASE, 6000 / (500 * math.sqrt(5))),  # 4x over 5 requests
    ([(6400.0, 4.0)], BASE, 0.0),  # 4x, but over 4 requests: one or two prompts of a heavy tail decide it
    ([(150_000.0, 250.0)], BASE, 0.0),  # 1.5x over 250 requests: significant, but no doubling
    ([(8000.0, 5.0), (10_000.0, 10.0), (14_000.0, 20.0)], BASE, 6000 / (500 * math.sqrt(5))),  # the quarter
    ([(8000.0, 5.0)], PromptBaseline(400.0, 410_000.0, requests=40.0),  # a 40-request baseline is itself uncertain
     6000 / math.sqrt(5 * 250_000 + 25 * 250_000 / 40)),
    ([(8000.0, 5.0)], PromptBaseline(400.0, 400.0**2), 6000 / (40 * math.sqrt(5))),  # no spread: sd ≥ 10% of mean
])
def test_prompt_shift_z(spans: list[tuple[float, float]], base: PromptBaseline, z: float) -> None:
    assert prompt_shift_z(spans, base) == pytest.approx(z)


def test_probe_prefills_by_their_first_token_time() -> None:
    load = ProbeLoad(horizon=20.0)
    # results come back out of order: 2.0 (a slow request's) after 12.0
    load.observe([], 20.0, [("t", 12.0, 100), ("t", 19.0, 300), ("u", 19.0, 50), ("t", 2.0, 7)])
    assert load.prefills("t", 10.0, 20.0) == (2, 400.0, 100.0**2 + 300.0**2)
    assert load.prefills("t", 20.0, 20.0) == (3, 407.0, 100_049.0)
    load.observe([], 25.0)  # over the horizon (before 5.0): forgotten, though it came after a newer one
    assert load.prefills("t", 100.0, 25.0) == (2, 400.0, 100_000.0)
    load.forget(["u"])
    assert load.prefills("t", 20.0, 20.0) == (0, 0.0, 0.0) and load.prefills("u", 20.0, 20.0)[0] == 1


BOUNDS = (50.0, 100.0, 500.0, 1000.0, 5000.0, INF)


def _feed(seconds: int, user_tokens: list[int]) -> tuple[ServerWindows, ProbeLoad]:
    """Scrape once a second; each second 2 probes of 100 tokens and one user request of user_tokens[i] prefill."""
    server, load = ServerWindows(), ProbeLoad(horizon=60.0)
    prompts, first, lengths, total = 0.0, 0.0, [0.0] * len(BOUNDS), 0.0
    for i in range(seconds):
        if i:
            done = [100, 100, user_tokens[i]]
            prompts, first, total = prompts + sum(done), first + 3, total + sum(done)
            lengths = [n + sum(1 for v in done if v <= b) for n, b in zip(lengths, BOUNDS, strict=True)]
            load.observe([], float(i), [("t", i - 0.5, 100), ("t", i - 0.4, 100)])
        hists = {"ttft": Histogram(((1.0, first), (INF, first)), first, 0.1 * first),
                 "prompt_length": Histogram(tuple(zip(BOUNDS, lengths, strict=True)), first, total)}
        mv = ModelView("m", histograms=hists, counters={"prompt_tokens": prompts}, finished_by_reason={"stop": first})
        server.add(ServerView("t", "vllm", float(i), {"m": mv}))
    return server, load


def test_the_users_prompts_without_the_probes() -> None:
    """Probes of 100 tokens, users' prompts of 1000: each at its bucket's bound, so the second moment is exact."""
    server, load = _feed(21, [1000] * 21)
    sig = users(server, "t", 20.0, 20.0, load, None)
    assert sig == {"user_prompt_tokens_per_request": pytest.approx(1000.0),
                   "user_prompt_tokens_sq": pytest.approx(1000.0**2)}


def test_a_shift_of_the_users_prompts_over_the_last_quarter() -> None:
    """15 s of 1000-token prompts, then 5 s of 5000: the quarter's users doubled (5x), sd from their baseline."""
    server, load = _feed(21, [1000] * 16 + [5000] * 5)
    base = PromptBaseline(1000.0, 1000.0**2 + 800.0**2)
    sig = users(server, "t", 20.0, 20.0, load, base)
    assert sig["user_prompt_tokens_per_request"] == pytest.approx((15 * 1000 + 5 * 5000) / 20)
    # spans: quarter 5 users at 5000 (z 20000 / (800 √5)); half 10 at 2.5x (z 15000 / (800 √10)); whole 2x
    assert sig["prompt_shift_z"] == pytest.approx(20_000 / (800 * math.sqrt(5)))


def test_no_span_before_the_scrapes_cover_the_window() -> None:
    server, load = _feed(11, [1000] * 11)  # 10 s of scrapes for a 20 s window
    assert users(server, "t", 20.0, 10.0, load, BASE) == {}
