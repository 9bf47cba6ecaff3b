"""The users' prompt lengths at a target: their mean prefilled over the window and its most recent spans.

The engine counts prompt tokens and first tokens as each request's prefill ends, the probes' too; sloguard's
own prefills (each result's prompt tokens at its first token) are taken out, so the means are the users'.
A shift to longer prompts is plainest over the span it has filled: `prompt_tokens_recent` is the largest mean over
the window's last thirty-second, sixteenth, eighth, quarter, half or whole that holds enough of the users' prefills
to be no burst (MIN_SPAN_PREFILLS). Every span ends at the target's newest scrape (arrivals.span_end), not at `now`:
a counter's span starts at the last scrape at or before its start, so a span anchored at `now` covered a scrape
interval less whenever the evaluation came late in one, and a span that is no whole number of scrape intervals then
fell under FULL and went missing (at the defaults' 15 s scrapes the sixteenth, 18.75 s, read 15 s at 3 of 4 phases
of the evaluations against the scrapes, the eighth 30 s at half of them); from the newest scrape the sixteenth reads
the last 30 s and the eighth 45 s at every phase, the thirty-second (9.4 s) the last scrape interval: where the
engine queues, the prefills of that one interval are of requests that came after the shift while the 30 s before it
still held the old prompts (5 users/s: a 4x shift read 2.9-3.0x over the sixteenth for three evaluations). Measured
at the daemon's defaults (300 s window, 15 s evaluations and scrapes; benchmarks/diagnosis_defaults.py: virtual
time, the simulator's engine, prompts x4, 30 seeds per rate, each seed's evaluations at its own phase after the
scrapes): the long_prompts rows held a median 4, 2 and 2 evaluations after the shift at 0.5, 2 and 5 users/s (4, 3
and 3 without the thirty-second; 5, 4 and 4 before the spans ended at the newest scrape), where on the whole
window's mean (its 2x with the finish-observed p90, or 3x) they took 8, 8 and 10; no healthy run held them. At 1
user/s over a 20 s window (the diagnosis benchmark) the shorter spans seldom count: as before.
Pure and clock-free: `now` comes from the caller.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from sloguard import histogram
from sloguard.diagnose.arrivals import FULL, ProbeLoad, span_end
from sloguard.diagnose.history import Series

if TYPE_CHECKING:
    from sloguard.diagnose.model import ServerLike

PROMPT_Q = 0.9  # prompt_tokens_p90: the prompt length ≥ 10% of the window's requests reached
MIN_USER_PREFILLS = 5  # the users' prefills the whole window needs for their mean prompt length
# A span shorter than the window needs 20 of the users' prefills: over a quarter of a 20 s window (5 at 1
# user/s) a few long prefills made the mean flicker from 1x to 4x its baseline (benchmark traces); with 10 the
# lognormal replay reached 3x in 11% of healthy runs, with 20 in 1.7%.
MIN_SPAN_PREFILLS = 20
RECENT_SPANS = (0.03125, 0.0625, 0.125, 0.25, 0.5)
PROMPT_SIGNALS = ("prompt_tokens_per_request", "prompt_tokens_recent", "prompt_tokens_p90")
# A prompt baseline counts once it rests on this many of the users' prefills: their mean from fewer is itself noise
# (relative error about the mix's coefficient of variation / sqrt(n): 1.2 / 10 = 12% here, where 1.2 is the
# simulator's mix and real prompt mixes run 1-2). Benchmark trace (seed 4002): the users' first 40 s drew few long
# prompts, a baseline learned from ~45 of their prefills read 0.46x the mix's mean, the usual prompts then read
# 2.3-2.9x of it (the p90 3.5x) and named long_prompts in three runs of other faults.
MIN_BASELINE_PREFILLS = 100
# The users' mean prompt baselines are the mean of the healthy window means, not their median: each window's mean of
# a right-skewed mix is right-skewed, so the median of them reads low, and a baseline that reads low makes the usual
# prompts look longer. benchmarks/prompt_detectors.py (1 user/s, 20 s window, 200 s warm-up, 4,000 runs): the
# median learned the simulator's mix at 0.985x its mean (under 0.75x in 1.3% of runs) and a log-normal one
# (variation 1.69) at 0.93x (under 0.75x in 6.4%); the mean at 1.00x and 0.98x (0.4% and 2.4%). The 2.5x row then
# alarms in 0.5% and 6.9% of healthy minutes, not 0.8% and 9.0%, and names a x4 shift as soon (median 10 and 11 s).
MEAN_BASELINES = ("prompt_tokens_per_request", "prompt_tokens_recent")


def _users_mean(prompts: tuple[float, float], first: float, probes: ProbeLoad | None, target: str, now: float,
                least: int) -> float | None:
    """Return the users' mean prompt prefilled from a span's (prompt tokens, span) and first tokens, or None below
    `least` of their prefills.

    Never the probes' mean in the users' place (a target only sloguard probes has no users' prompts to
    shift), which would become a baseline that the users' own prompts read 3x over. A probe counts as its first
    token comes (ProbeLoad: live from the probe process, the server's count once its result is back).
    """
    count, tokens = probes.prefills(target, prompts[1], now) if probes is not None else (0, 0)
    users, user_tokens = first - count, prompts[0] - tokens
    return user_tokens / users if users >= least and user_tokens > 0 else None


def _span_mean(server: ServerLike, target: str, span: float, now: float, probes: ProbeLoad | None) -> float | None:
    """Return the users' mean prompt over a recent span, or None below MIN_SPAN_PREFILLS or a partial span."""
    prompts = server.increase(target, ("prompt_tokens",), span, now)
    first = server.histogram(target, None, "ttft", span, now)
    if prompts is None or first is None or prompts[1] < FULL * span:
        return None
    return _users_mean(prompts, first.count, probes, target, now, MIN_SPAN_PREFILLS)


def _finished_prompts(series: Series, server: ServerLike, target: str, finished: Collection[str],
                      prompts: tuple[float, float] | None, window: float, now: float) -> dict[str, float]:
    """Return prompt_tokens_per_request without a TTFT histogram: prompt tokens ÷ requests started.

    Started: finished plus the running count's growth (prefilled but not finished yet).
    """
    done = server.increase(target, finished, window, now) if finished else None
    if done is None or prompts is None:
        return {}
    started = done[0] + (series.change(f"{target}/requests_running", window, now) or 0.0)
    return {"prompt_tokens_per_request": prompts[0] / started} if started > 0 else {}


def settled(learned: Mapping[str, float], spans: Mapping[str, float], window: float) -> tuple[dict[str, float],
                                                                                          dict[str, str]]:
    """Return the baselines less the prompt ones resting on < MIN_BASELINE_PREFILLS users' prefills, and why.

    The prefills behind a baseline: the users' learned arrival rate (all requests' where it is not known) × the
    span of the healthy values it rests on plus one window (each value read a window back). Without a learned rate
    the count is unknown and the baselines stay.
    """
    rate = learned.get("user_request_rate", learned.get("request_rate"))
    kept, why = dict(learned), {}
    for key in PROMPT_SIGNALS:
        span = spans.get(key)
        if rate is None or key not in kept or span is None:
            continue
        if (n := rate * (span + window)) < MIN_BASELINE_PREFILLS:
            del kept[key]
            why[key] = f"baseline withheld: ~{n:.0f} of the users' prompts behind it, {MIN_BASELINE_PREFILLS} needed"
    return kept, why


def recent(server: ServerLike, target: str, window: float, now: float, probes: ProbeLoad | None,
           whole: float) -> float:
    """Return prompt_tokens_recent: the largest users' mean over the window and its recent spans that count."""
    means = (_span_mean(server, target, window * f, now, probes) for f in RECENT_SPANS)
    return max([whole, *(m for m in means if m is not None)])


def prompt_length(series: Series, server: ServerLike, target: str, names: Collection[str],
                  finished: Collection[str], window: float, now: float,
                  probes: ProbeLoad | None = None) -> dict[str, float]:
    """Return the users' mean prompt prefilled over the window and its recent spans, and the prompt p90.

    The mean: prompt tokens ÷ first tokens (the TTFT histogram's count), both counted when a request's prefill
    ends, so it is the prompts the engine worked on, not those finishing (benchmark traces: with 2 probes/s of
    128 tokens beside 1 user/s, a 4x shift of the users' prompts moved the mean of all prompts 1.9-2.2x,
    blinking at its 2x threshold for 15 s; the users' own mean read 2.5x). Not over a window the prompt
    counter's scrapes cover less than FULL of (trace, healthy seed 501: a baseline learned from the first 24 s,
    partial windows of mostly short prompts, read the usual prompts 2x longer and named long_prompts). The
    per-request prompt-length histogram (vLLM `request_prompt_tokens`) is observed at finish: while long
    requests jam the engine the recent finishes are mostly the short ones. Its p90 is the shape check: the mean
    of a heavy-tailed mix moves with two or three long prompts (a burst, not a shift); the p90 moves only when
    ≥ 10% of the window's requests got longer. Without a TTFT histogram: the histogram's mean; without either,
    prompt tokens ÷ requests started.
    """
    out: dict[str, float] = {}
    latest = server.latest(target)
    now = span_end(latest.ts if latest is not None else None, now, window)
    prompts = server.increase(target, ("prompt_tokens",), window, now)
    if prompts is not None and prompts[1] < FULL * window:
        return out  # a partial window (just started): its few requests would become the baseline
    h = server.histogram(target, None, "prompt_length", window, now)
    if h is not None and h.count > 0:
        out["prompt_tokens_per_request"] = h.sum / h.count
        if (p90 := histogram.quantile(PROMPT_Q, h)) is not None:
            out["prompt_tokens_p90"] = p90
    if "prompt_tokens" not in names:
        return out
    first = server.histogram(target, None, "ttft", window, now)
    if first is None or prompts is None or first.count <= 0:
        return out or _finished_prompts(series, server, target, finished, prompts, window, now)
    out.pop("prompt_tokens_per_request", None)
    whole = _users_mean(prompts, first.count, probes, target, now, MIN_USER_PREFILLS if probes is not None else 1)
    if whole is not None:
        out["prompt_tokens_per_request"] = whole
        out["prompt_tokens_recent"] = recent(server, target, window, now, probes, whole)
    return out
