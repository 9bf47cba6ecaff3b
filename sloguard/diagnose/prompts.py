"""The users' own prompt lengths at a target, and a shift to longer prompts told by its significance.

The engine counts prompt tokens and first tokens as each request's prefill ends, the probes' too. Taking the
probes' own prefills out leaves the users' prompts; their healthy mean and spread (the second moment, from
the engine's prompt-length histogram) say how far a span's total may stray by chance. A shift is then named
from the span it has filled (the window's last quarter, half or whole), not only once it has doubled the mean
of the whole window: at 1 user request/s and a 4x shift, an idealised replay (Poisson arrivals, the
simulator's prompt mix, instant prefills) gave a median of 5 s to z ≥ 4 where the 20 s window's mean of all
prompts (2 probes/s included) took 11 s to double, and at a 300 s window with 15 s evaluations a median of 2
evaluations where the mean took 7. Pure and clock-free.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from sloguard.diagnose.arrivals import FULL, SURGE_SPANS, ProbeLoad
from sloguard.model import Histogram

if TYPE_CHECKING:
    from sloguard.diagnose.signals import ServerLike

SHIFT = 2.0  # a span counts only where the users' mean prompt reached this × its baseline (the effect, not noise)
MIN_REQUESTS = 5  # users' prefills a span needs: below, one or two prompts of a heavy-tailed mix decide it


class PromptBaseline(NamedTuple):
    """The users' healthy prompt tokens per request, its second moment, and how many requests it was learned over."""

    mean: float
    second_moment: float
    requests: float = math.inf


def second_moment(h: Histogram) -> float | None:
    """Return the mean of the squared observations of a histogram delta, or None without observations.

    Every bucket's observations sit at one common position within their bucket, fitted so that the buckets
    give the histogram's own sum: exact for values at one point of each bucket, and within-bucket spread left
    out. Observations over the last finite bound sit at it (a lower bound).
    """
    if h.count <= 0:
        return None
    parts, lo, prev = [], 0.0, 0.0
    for bound, cum in h.buckets:
        n = max(0.0, cum - prev)
        parts.append((n, lo, bound - lo if math.isfinite(bound) else 0.0))
        if math.isfinite(bound):
            lo = bound
        prev = max(prev, cum)
    spread = sum(n * width for n, _, width in parts)
    low = sum(n * start for n, start, _ in parts)
    at = min(1.0, max(0.0, (h.sum - low) / spread)) if spread > 0 else 0.0
    total = sum(n for n, _, _ in parts)
    return sum(n * (start + at * width) ** 2 for n, start, width in parts) / total if total > 0 else None


def prompt_shift_z(spans: Iterable[tuple[float, float]], base: PromptBaseline) -> float:
    """Return the largest z of the users' prompt tokens over (tokens, requests) spans whose mean reached SHIFT×.

    z = (tokens − requests × mean) / sd, with var = requests × (second moment − mean²) per the users' healthy
    prompts, plus the baseline mean's own error (requests² × variance / requests it was learned over). A span
    with fewer than MIN_REQUESTS prefills is left out. 0 when no span qualifies; never negative.
    """
    var = max(base.second_moment - base.mean**2, (0.1 * base.mean) ** 2)
    best = 0.0
    for tokens, requests in spans:
        if requests < MIN_REQUESTS or tokens < SHIFT * base.mean * requests:
            continue
        sd = math.sqrt(requests * var + requests * requests * var / base.requests)
        best = max(best, (tokens - requests * base.mean) / sd)
    return best


def _prefilled(server: ServerLike, target: str, window: float, now: float,
               probes: ProbeLoad) -> tuple[float, float, float] | None:
    """Return the users' (prompt tokens, prefills) over the window, and the seconds the scrapes covered."""
    prompts = server.increase(target, ("prompt_tokens",), window, now)
    first = server.histogram(target, None, "ttft", window, now)
    if prompts is None or first is None:
        return None
    count, tokens, _ = probes.prefills(target, window, now)
    return max(0.0, prompts[0] - tokens), max(0.0, first.count - count), prompts[1]


def users(server: ServerLike, target: str, window: float, now: float, probes: ProbeLoad,
          base: PromptBaseline | None) -> dict[str, float]:
    """Return user_prompt_tokens_per_request, user_prompt_tokens_sq and, with their baseline, prompt_shift_z.

    The second moment comes from the engine's prompt-length histogram (observed at finish, all requests) less
    the probes' own prompts of the window. A span the scrapes cover less than FULL of is left out.
    """
    spans = {f: (got[0], got[1]) for f in SURGE_SPANS
             if (got := _prefilled(server, target, window * f, now, probes)) is not None
             and got[2] >= FULL * window * f}
    whole = spans.get(1.0)
    if whole is None or whole[1] <= 0:
        return {}
    out = {"user_prompt_tokens_per_request": whole[0] / whole[1]}
    h = server.histogram(target, None, "prompt_length", window, now)
    if h is not None and (m2 := second_moment(h)) is not None:
        count, _, squares = probes.prefills(target, window, now)
        if h.count - count > 0:
            out["user_prompt_tokens_sq"] = max(0.0, m2 * h.count - squares) / (h.count - count)
    if base is not None:
        out["prompt_shift_z"] = prompt_shift_z(spans.values(), base)
    return out
