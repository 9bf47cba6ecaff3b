"""Pure DESIGN.md §4 maths: stamped, decoded stream events -> TTFT, TTFOT, E2E, per-token ITL, TPOT.

Which events carry tokens (README "Exact definitions"): every event with generated text; every event that
states its tokens (`token_ids`, logprobs, TGI's one token per event), text or not; and textless generation
steps (an empty delta, the finish chunk), counted against the server's usage total:
- usage = text events + textless steps: the engine streams one token per event (vLLM: a token that decodes
  to no text yet, and the end-of-sequence token, arrive as empty-text events): each carries one;
- usage = text events + textless steps − 1, the last step a finish chunk of its own: one token per event, the
  finish chunk none (vLLM: finish_reason "length" in an empty delta after the last token);
- otherwise a textless finish chunk whose reason is not "length" carries the one token that ended the answer
  (llama.cpp: end-of-sequence or the last token of a stop string, counted in usage but never sent as text);
  the rest of usage is shared over the text events by text length (multi-token chunks, held-back bytes).
E2E ends at the last token-carrying event, so TPOT = (E2E - TTFT) / (usage - 1) holds for streams ending on
EOS. Memory is O(events) while a request runs (bounded by the probe's `max_events`); a result keeps only
per-request ITL statistics and histogram bucket counts, never the per-token list.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise
from math import fsum
from typing import NamedTuple

from sloguard.probes.chunk import Chunk
from sloguard.traces.record import ServerRecord

NS = 1e-9
SLICE_EVENTS = 2048  # candidate events per slice of the end-of-request pass (~0.5 ms)
# Bucket bounds (seconds) of the per-token ITL histogram; a result carries its own counts per bucket (+Inf last).
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,
               0.15, 0.2, 0.3, 0.5, 1.0, 2.5)


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
    record: ServerRecord | None = None


class _Cands:
    """Candidate events as typed columns: compact (17 bytes each) and invisible to the garbage collector."""

    __slots__ = ("chars", "stated", "t_ns", "text")

    def __init__(self) -> None:
        self.t_ns, self.chars, self.stated, self.text = array("q"), array("q"), array("q"), array("b")

    def append(self, t_ns: int, chars: int, stated: int, text: bool) -> None:
        self.t_ns.append(t_ns)
        self.chars.append(chars)
        self.stated.append(stated)  # -1: not stated
        self.text.append(text)

    def __len__(self) -> int:
        return len(self.t_ns)


class _Rule(NamedTuple):
    """How many tokens each kind of unstated candidate carries (decided once usage is known)."""

    text: float  # per unstated text event when not shared by length (1.0)
    share: float  # > 0: text events carry share * chars / text_chars instead
    chars: int
    steps: float  # per unstated textless step
    eos_index: int  # the one step that carries the final token (-1: none)
    skip_index: int = -1  # the one step that carries none: a textless finish chunk after the last token


class Tally:
    """Accumulate decoded events in arrival order (O(1) each); `summary(t0)` applies §4 once at the end.

    The token-count rule is decided from running counters (O(1)); the final pass over the candidate events
    runs in slices of SLICE_EVENTS (`steps`), so a caller on an event loop can yield between them.
    """

    __slots__ = ("_cands", "_first_content", "_first_text", "_last_finish", "_last_step", "_n_steps", "_n_text",
                 "_stated", "_text_chars", "done", "error", "events", "output", "prompt", "record")

    def __init__(self) -> None:
        self._cands = _Cands()
        self._last_finish = ""
        self._first_text: int | None = None
        self._first_content: int | None = None
        self._stated = self._n_text = self._n_steps = self._text_chars = 0
        self._last_step = -1
        self.output: int | None = None
        self.prompt: int | None = None
        self.error: str | None = None
        self.record: ServerRecord | None = None
        self.done = False
        self.events = 0

    @property
    def output_seen(self) -> bool:
        """Return whether an event carried output yet: text, a stated token or a textless step (the prefill ended)."""
        return len(self._cands) > 0

    def add(self, t_ns: int, c: Chunk) -> None:
        """Record one event; later usage totals win over earlier partial ones."""
        self.events += 1
        self.output = c.output_tokens if c.output_tokens is not None else self.output
        self.prompt = c.prompt_tokens if c.prompt_tokens is not None else self.prompt
        self.error = c.error if c.error is not None else self.error
        self.record = c.record if c.record is not None else self.record
        self.done = self.done or c.done
        if c.bearing:
            self._first_text = t_ns if self._first_text is None else self._first_text
            if c.content and self._first_content is None:
                self._first_content = t_ns
        if not (c.bearing or c.step or (c.tokens or 0) > 0):
            return
        if c.tokens is not None:
            self._stated += c.tokens
        elif c.bearing:
            self._n_text += 1
            self._text_chars += c.chars
        else:
            self._n_steps += 1
            self._last_step, self._last_finish = len(self._cands), c.finish
        self._cands.append(t_ns, c.chars, -1 if c.tokens is None else c.tokens, c.bearing)

    def rule(self) -> _Rule:
        """Decide which candidates carry how many tokens (module docstring), from the counters alone."""
        text, steps, output = self._n_text, self._n_steps, self.output
        if output is None:
            return _Rule(1.0, 0.0, 0, 0.0, -1)
        remainder = output - self._stated
        if remainder == text + steps:  # one token per event, empty-text steps included
            return _Rule(1.0, 0.0, 0, 1.0, -1)
        last = self._last_step
        if last == len(self._cands) - 1 and self._last_finish and remainder == text + steps - 1:
            # one token per event, and the finish came in a chunk of its own (vLLM's {} delta with finish_reason)
            return _Rule(1.0, 0.0, 0, 1.0, -1, last)
        eos = last >= 0 and self._last_finish not in ("", "length") and remainder >= text + 1
        share = remainder - (1 if eos else 0)
        spread = text > 0 and share > text + (0 if eos else 1)
        if not spread:
            return _Rule(1.0, 0.0, 0, 0.0, last if eos else -1)
        if self._text_chars > 0:
            return _Rule(1.0, float(share), self._text_chars, 0.0, last if eos else -1)
        return _Rule(share / text, 0.0, 0, 0.0, last if eos else -1)

    def steps(self, t0_ns: int, gaps: bool = True) -> Generator[None, None, Summary]:
        """Compute the summary, yielding after every SLICE_EVENTS candidates; the Summary is the return value.

        `gaps=False` (a request that already failed: timeout, flood, reset) skips the per-token pass: TTFT,
        E2E and the token events come from the first and last carrying events, O(1) however long the stream
        was, so a timed-out request reports at its deadline.
        """
        rule, cands = self.rule(), self._cands
        if not gaps:
            ends = [i for i in _ends(len(cands)) if _tokens(cands, i, rule) > 0]
            first, last = (cands.t_ns[ends[0]], cands.t_ns[ends[-1]]) if ends else (-1, -1)
            return self._summary(t0_ns, first, last, len(ends), None)
        pairs: list[tuple[float, int]] = []
        prev = first = -1
        carrying = 0
        for lo in range(0, len(cands), SLICE_EVENTS):
            if lo:
                yield
            for i in range(lo, min(lo + SLICE_EVENTS, len(cands))):
                k = _tokens(cands, i, rule)
                if k <= 0:
                    continue
                t_ns = cands.t_ns[i]
                if carrying:  # correctly rounded: 30 ms / 2 == 0.015, on its bucket bound
                    pairs.append(((t_ns - prev) / (max(k, 1.0) * 1e9), max(1, round(k))))
                else:
                    first = t_ns
                prev, carrying = t_ns, carrying + 1
        yield
        return self._summary(t0_ns, first, prev, carrying, _stats(pairs))

    def summary(self, t0_ns: int, gaps: bool = True) -> Summary:
        """Return the §4 timings relative to `t0_ns` (all slices at once)."""
        gen = self.steps(t0_ns, gaps)
        while True:
            try:
                next(gen)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]

    def _summary(self, t0_ns: int, first: int, last: int, carrying: int, itl: GapStats | None) -> Summary:
        base = Summary(output_tokens=self.output, prompt_tokens=self.prompt, error=self.error, done=self.done,
                       token_events=carrying, record=self.record)
        if not carrying:
            return base
        ttft = None if self._first_text is None else (self._first_text - t0_ns) * NS
        e2e = (last - t0_ns) * NS
        ttfot = None if self._first_content is None else (self._first_content - t0_ns) * NS
        output = self.output
        tpot = (e2e - ttft) / (output - 1) if ttft is not None and output is not None and output > 1 else None
        return Summary(ttft_s=ttft, ttfot_s=ttfot, e2e_s=e2e, tpot_s=tpot, itl=itl, output_tokens=output,
                       prompt_tokens=self.prompt, error=self.error, done=self.done, token_events=carrying,
                       record=self.record)


def _ends(n: int, k: int = 64) -> list[int]:
    """Indexes of the first and last `k` candidates (where the first and last carrying events are found)."""
    return list(range(n)) if n <= 2 * k else [*range(k), *range(n - k, n)]


def _tokens(cands: _Cands, i: int, rule: _Rule) -> float:
    stated = cands.stated[i]
    if stated >= 0:
        return float(stated)
    if cands.text[i]:
        return rule.share * cands.chars[i] / rule.chars if rule.share else rule.text
    if i == rule.skip_index:
        return 0.0
    return 1.0 if i == rule.eos_index else rule.steps


def summarize(t0_ns: int, events: Iterable[tuple[int, Chunk]]) -> Summary:
    """Apply the §4 definitions to `(arrival_ns, chunk)` pairs; output tokens only from the server."""
    tally = Tally()
    for t_ns, c in events:
        tally.add(t_ns, c)
    return tally.summary(t0_ns)


def gap_stats(carrying: Sequence[tuple[int, float]]) -> GapStats | None:
    """Per-token gaps of `(arrival_ns, tokens)` events: each gap split evenly over the tokens its event carried."""
    return _stats([((t - prev) / (max(k, 1.0) * 1e9), max(1, round(k))) for (prev, _), (t, k) in pairwise(carrying)])


def _stats(pairs: list[tuple[float, int]]) -> GapStats | None:
    """Quantiles, bucket counts and sum of (per-token gap, tokens) pairs; None without a gap.

    O(n log n) in C-level calls (sort, bisect, accumulate), never a per-token list.
    """
    if not pairs:
        return None
    pairs.sort()
    values = [v for v, _ in pairs]
    cum = list(accumulate(n for _, n in pairs))
    below = [cum[i - 1] if i else 0 for i in (bisect_right(values, b) for b in ITL_BUCKETS)]
    counts = tuple(b - a for a, b in pairwise((0, *below, cum[-1])))
    total = fsum(v * n for v, n in pairs)
    return GapStats(_rank_quantile(values, cum, 0.5), _rank_quantile(values, cum, 0.99), values[-1], counts, total)


def _rank_quantile(values: Sequence[float], cum: Sequence[int], q: float) -> float:
    """`percentile` over the list in which values[i] repeats cum[i] - cum[i-1] times, without building it."""
    pos = q * (cum[-1] - 1)
    lo = int(pos)
    i = bisect_right(cum, lo)
    j = bisect_right(cum, lo + 1) if lo + 1 < cum[-1] else i
    return values[i] + (values[min(j, len(values) - 1)] - values[i]) * (pos - lo)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Return the q-th (0..1) percentile with linear interpolation between closest ranks."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)
