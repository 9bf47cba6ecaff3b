"""Pure DESIGN.md §4 maths: stamped, decoded stream events -> TTFT, TTFOT, E2E, per-token ITL, TPOT.

Which events carry tokens (README "Exact definitions"): every event with generated text; every event that
states its tokens (`token_ids`, logprobs, TGI's one token per event), text or not; and textless generation
steps (an empty delta, the finish chunk), counted against the server's usage total:
- usage = text events + textless steps: the engine streams one token per event (vLLM: a token that decodes
  to no text yet, and the end-of-sequence token, arrive as empty-text events): each carries one;
- otherwise a textless finish chunk whose reason is not "length" carries the one token that ended the answer
  (llama.cpp: end-of-sequence or the last token of a stop string, counted in usage but never sent as text);
  the rest of usage is shared over the text events by text length (multi-token chunks, held-back bytes).
E2E ends at the last token-carrying event, so TPOT = (E2E - TTFT) / (usage - 1) holds for streams ending on
EOS. Memory is O(events) while a request runs (bounded by the probe's `max_events`); a result keeps only
per-request ITL statistics and histogram bucket counts, never the per-token list.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

NS = 1e-9
# Bucket bounds (seconds) of the per-token ITL histogram; a result carries its own counts per bucket (+Inf last).
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,
               0.15, 0.2, 0.3, 0.5, 1.0, 2.5)


@dataclass(frozen=True, slots=True)
class Chunk:
    """What one stream event says, decoded by an API module; everything optional (add new fields at the end)."""

    content: bool = False  # carries >= 1 generated non-reasoning token
    reasoning: bool = False  # carries >= 1 generated reasoning token
    tokens: int | None = None  # token count, only where the event states it (token_ids, logprobs, TGI)
    output_tokens: int | None = None  # server-reported generated tokens (usage, details, timings)
    prompt_tokens: int | None = None
    error: str | None = None
    done: bool = False  # a terminator the API defines ([DONE], finish_reason, final details)
    chars: int = 0  # generated text length, to share out a server token total over uneven chunks
    step: bool = False  # a generation step without text (empty delta, finish chunk): may carry a token
    finish: str = ""  # finish_reason as sent ("stop", "length", ...), "" when none

    @property
    def bearing(self) -> bool:
        """Return True if the event carries generated text (content or reasoning)."""
        return self.content or self.reasoning


@dataclass(frozen=True, slots=True)
class GapStats:
    """Per-token inter-token gaps of one request: quantiles, bucket counts (ITL_BUCKETS + +Inf) and sum."""

    p50_s: float
    p99_s: float
    max_s: float
    counts: tuple[int, ...]
    sum_s: float


@dataclass(frozen=True, slots=True)
class Summary:
    """Timings of one request in seconds from t0; None where undefined."""

    ttft_s: float | None = None
    ttfot_s: float | None = None
    e2e_s: float | None = None
    tpot_s: float | None = None
    itl: GapStats | None = None
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    error: str | None = None
    done: bool = False
    token_events: int = 0  # events that carried >= 1 token (text or not)


class _Cand(NamedTuple):
    t_ns: int
    chars: int
    stated: int  # -1: not stated
    text: bool
    finish: str


class Tally:
    """Accumulate decoded events in arrival order (O(1) each); `summary(t0)` applies §4 once at the end."""

    __slots__ = ("_cands", "_first_content", "_first_text", "done", "error", "events", "output", "prompt")

    def __init__(self) -> None:
        self._cands: list[_Cand] = []
        self._first_text: int | None = None
        self._first_content: int | None = None
        self.output: int | None = None
        self.prompt: int | None = None
        self.error: str | None = None
        self.done = False
        self.events = 0

    def add(self, t_ns: int, c: Chunk) -> None:
        """Record one event; later usage totals win over earlier partial ones."""
        self.events += 1
        self.output = c.output_tokens if c.output_tokens is not None else self.output
        self.prompt = c.prompt_tokens if c.prompt_tokens is not None else self.prompt
        self.error = c.error if c.error is not None else self.error
        self.done = self.done or c.done
        if c.bearing:
            self._first_text = t_ns if self._first_text is None else self._first_text
            if c.content and self._first_content is None:
                self._first_content = t_ns
        if c.bearing or c.step or (c.tokens or 0) > 0:
            stated = -1 if c.tokens is None else c.tokens
            self._cands.append(_Cand(t_ns, c.chars, stated, c.bearing, c.finish))

    def summary(self, t0_ns: int) -> Summary:
        """Return the §4 timings relative to `t0_ns`."""
        counts = token_counts(self._cands, self.output)
        carrying = [(c.t_ns, k) for c, k in zip(self._cands, counts, strict=True) if k > 0]
        base = Summary(output_tokens=self.output, prompt_tokens=self.prompt, error=self.error, done=self.done,
                       token_events=len(carrying))
        if not carrying:
            return base
        ttft = None if self._first_text is None else (self._first_text - t0_ns) * NS
        e2e = (carrying[-1][0] - t0_ns) * NS
        ttfot = None if self._first_content is None else (self._first_content - t0_ns) * NS
        output = self.output
        tpot = (e2e - ttft) / (output - 1) if ttft is not None and output is not None and output > 1 else None
        return Summary(ttft_s=ttft, ttfot_s=ttfot, e2e_s=e2e, tpot_s=tpot, itl=gap_stats(carrying),
                       output_tokens=output, prompt_tokens=self.prompt, error=self.error, done=self.done,
                       token_events=len(carrying))


def summarize(t0_ns: int, events: Iterable[tuple[int, Chunk]]) -> Summary:
    """Apply the §4 definitions to `(arrival_ns, chunk)` pairs; output tokens only from the server."""
    tally = Tally()
    for t_ns, c in events:
        tally.add(t_ns, c)
    return tally.summary(t0_ns)


def token_counts(cands: Sequence[_Cand], output: int | None) -> list[float]:
    """Tokens carried by each candidate event (module docstring); stated counts as given."""
    counts = [float(c.stated) if c.stated >= 0 else 0.0 for c in cands]
    text = [i for i, c in enumerate(cands) if c.stated < 0 and c.text]
    steps = [i for i, c in enumerate(cands) if c.stated < 0 and not c.text]
    if output is None:
        for i in text:
            counts[i] = 1.0
        return counts
    remainder = output - sum(c.stated for c in cands if c.stated >= 0)
    if remainder == len(text) + len(steps):  # one token per event, empty-text steps included
        for i in (*text, *steps):
            counts[i] = 1.0
        return counts
    last = steps[-1] if steps else None
    eos = last is not None and cands[last].finish not in ("", "length") and remainder >= len(text) + 1
    if eos and last is not None:
        counts[last] = 1.0
        remainder -= 1
    _share(cands, text, counts, remainder, slack=0 if eos else 1)
    return counts


def _share(cands: Sequence[_Cand], text: Sequence[int], counts: list[float], remainder: int, slack: int) -> None:
    """Give each text event one token, or share `remainder` by text length when it holds clearly more."""
    spread = bool(text) and remainder > len(text) + slack
    chars = sum(cands[i].chars for i in text)
    for i in text:
        if not spread:
            counts[i] = 1.0
        elif chars > 0:
            counts[i] = remainder * cands[i].chars / chars
        else:
            counts[i] = remainder / len(text)


def gap_stats(carrying: Sequence[tuple[int, float]]) -> GapStats | None:
    """Per-token gaps: each event's gap split evenly over the tokens it carried; None for one event."""
    if len(carrying) < 2:
        return None
    weighted: list[tuple[float, int]] = []
    for (prev, _), (t, k) in pairwise(carrying):
        k = max(k, 1.0)
        weighted.append(((t - prev) / (k * 1e9), max(1, round(k))))  # correctly rounded: 30 ms / 2 == 0.015
    weighted.sort()
    buckets = [0] * (len(ITL_BUCKETS) + 1)
    total = 0.0
    for value, n in weighted:
        buckets[bisect_left(ITL_BUCKETS, value)] += n  # le is inclusive: value == bound falls in that bucket
        total += value * n
    return GapStats(weighted_percentile(weighted, 0.5), weighted_percentile(weighted, 0.99), weighted[-1][0],
                    tuple(buckets), total)


def weighted_percentile(sorted_pairs: Sequence[tuple[float, int]], q: float) -> float:
    """Return `percentile` of the list where each value repeats its count, without building that list."""
    n = sum(c for _, c in sorted_pairs)
    pos = q * (n - 1)
    lo = int(pos)
    lo_v = hi_v = sorted_pairs[-1][0]
    seen = 0
    for i, (value, count) in enumerate(sorted_pairs):
        if lo < seen + count:
            lo_v = value
            hi_v = value if lo + 1 < seen + count else sorted_pairs[min(i + 1, len(sorted_pairs) - 1)][0]
            break
        seen += count
    return lo_v + (hi_v - lo_v) * (pos - lo)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Return the q-th (0..1) percentile with linear interpolation between closest ranks."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)
