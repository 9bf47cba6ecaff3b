"""Pure DESIGN.md §4 maths: stamped, decoded stream events -> TTFT, TTFOT, E2E, per-token ITL, TPOT."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TypeVar

from sloguard.traces.record import ServerRecord

NS = 1e-9
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Chunk:
    """What one stream event says, decoded by an API module; everything optional."""

    content: bool = False  # carries >= 1 generated non-reasoning token
    reasoning: bool = False  # carries >= 1 generated reasoning token
    tokens: int | None = None  # token count, only where the event states it (logprobs, TGI's one token)
    output_tokens: int | None = None  # server-reported generated tokens (usage, details, timings)
    prompt_tokens: int | None = None
    error: str | None = None
    done: bool = False  # a terminator the API defines ([DONE], finish_reason, final details)
    chars: int = 0  # generated text length, to share out a server token total over uneven chunks
    record: ServerRecord | None = None  # the server's own timings of the request, in-band (sloguard.traces)

    @property
    def bearing(self) -> bool:
        """Return True if the event carries at least one generated token (content or reasoning)."""
        return self.content or self.reasoning


@dataclass(frozen=True, slots=True)
class Summary:
    """Timings of one request in seconds from t0; None where undefined."""

    ttft_s: float | None = None
    ttfot_s: float | None = None
    e2e_s: float | None = None
    tpot_s: float | None = None
    itls_s: tuple[float, ...] = ()
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    error: str | None = None
    done: bool = False
    record: ServerRecord | None = None


def summarize(t0_ns: int, events: Sequence[tuple[int, Chunk]]) -> Summary:
    """Apply the §4 definitions to `(arrival_ns, chunk)` pairs; output tokens only from the server."""
    bearing = [(t, c) for t, c in events if c.bearing]
    output = _last(c.output_tokens for _, c in events)
    if not bearing:
        return Summary(output_tokens=output, prompt_tokens=_last(c.prompt_tokens for _, c in events),
                       error=_last(c.error for _, c in events), done=any(c.done for _, c in events),
                       record=_last(c.record for _, c in events))
    ttft = (bearing[0][0] - t0_ns) * NS
    e2e = (bearing[-1][0] - t0_ns) * NS
    ttfot = next(((t - t0_ns) * NS for t, c in bearing if c.content), None)
    tpot = (e2e - ttft) / (output - 1) if output is not None and output > 1 else None
    return Summary(
        ttft_s=ttft, ttfot_s=ttfot, e2e_s=e2e, tpot_s=tpot,
        itls_s=_itls(bearing, output), output_tokens=output,
        prompt_tokens=_last(c.prompt_tokens for _, c in events),
        error=_last(c.error for _, c in events), done=any(c.done for _, c in events),
        record=_last(c.record for _, c in events),
    )


def _itls(bearing: Sequence[tuple[int, Chunk]], output: int | None) -> tuple[float, ...]:
    """Per-token gaps: each event's gap split evenly over the tokens it carried."""
    counts = _token_counts(bearing, output)
    out: list[float] = []
    for ((prev, _), (t, _c)), k in zip(pairwise(bearing), counts[1:], strict=True):
        k = max(k, 1.0)
        out.extend([(t - prev) * NS / k] * max(1, round(k)))
    return tuple(out)


def _token_counts(bearing: Sequence[tuple[int, Chunk]], output: int | None) -> list[float]:
    """Tokens per event: stated counts as given; the server's remaining total shared out by text length."""
    implicit = [c for _, c in bearing if c.tokens is None]
    remainder = float(output - sum(c.tokens or 0 for _, c in bearing)) if output is not None else 0.0
    # usage counts the end-of-sequence token, which no event carries as text:
    # one token more than events is not a multi-token chunk
    spread = bool(implicit) and remainder > len(implicit) + 1
    chars = sum(c.chars for c in implicit)
    counts = []
    for _, c in bearing:
        if c.tokens is not None:
            counts.append(float(c.tokens))
        elif not spread:
            counts.append(1.0)
        elif chars > 0:
            counts.append(remainder * c.chars / chars)
        else:
            counts.append(remainder / len(implicit))
    return counts


def _last(values: Iterable[T | None]) -> T | None:
    """Return the last non-None value (the final usage chunk wins over earlier partial ones)."""
    found = None
    for v in values:
        if v is not None:
            found = v
    return found


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Return the q-th (0..1) percentile with linear interpolation between closest ranks."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)
