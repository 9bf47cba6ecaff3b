"""Pure verdicts of the guardrail probes: has the engine released an abandoned request, and what did a
server do with a prompt over its context length. The probes (sloguard.probes.abort, .oversized) do the I/O.

Outcomes that pass: `released`, `rejected`. Outcomes that fail (and count towards the built-in alerts):
`slow_release`, `leaked`, `slow_reject`, `accepted`, `truncated`, `hung`, `server_error`. `error` means the
check could not be made (the server failed before the check, or exposes no signal): neither pass nor fail.
"""

from __future__ import annotations

from dataclasses import dataclass

PASSED = frozenset({"released", "rejected"})
FAILED = frozenset({"slow_release", "leaked", "slow_reject", "accepted", "truncated", "hung", "server_error"})
ABORT_REASONS = ("abort", "cancelled")  # finished reasons of a request cancelled by its client (TRT-LLM: cancelled)


@dataclass(frozen=True, slots=True)
class EngineState:
    """What one /metrics read says about requests: running now, and aborted so far (None: not exposed)."""

    running: float | None
    aborted: float | None

    @property
    def readable(self) -> bool:
        """Return whether the engine exposes either signal."""
        return self.running is not None or self.aborted is not None


def released(base: EngineState, held: EngineState, now: EngineState, abort_count_works: bool = False) -> bool:
    """Return whether `now` shows the abandoned request gone.

    base: before the request was sent; held: while it streamed (after its first token, before the close).
    The engine's own abort count rising is exact. Once an engine's count has been seen to move for an abort
    (`abort_count_works`), only it decides: a running count that falls may be another request (an earlier
    leaked one) finishing. Before that (vLLM V1 before its abort-metric fix never counts client aborts), the
    running count must fall below what it was while the request was held: exact on a quiet server; on a
    busy one other requests move it too.
    """
    if now.aborted is not None and base.aborted is not None and now.aborted > base.aborted:
        return True
    if abort_count_works:
        return False
    return now.running is not None and held.running is not None and now.running <= held.running - 1


def abort_outcome(release_s: float | None, within: float) -> str:
    """Return released (within the bound), slow_release (later) or leaked (not seen before the watch ended)."""
    if release_s is None:
        return "leaked"
    return "released" if release_s <= within else "slow_release"


def oversized_outcome(status: int | None, timed_out: bool, elapsed: float, within: float,
                      prompt_tokens: int | None, context_length: int) -> str:
    """Return what a server did with a prompt over its context length.

    A 4xx in time is `rejected` (else `slow_reject`); a 200 whose usage counts no more prompt tokens than the
    context holds was `truncated` silently, else `accepted`; no answer in time is `hung`; a 5xx is
    `server_error`; a connection failure without a status is `error` (no verdict).
    """
    if timed_out:
        return "hung"
    if status is None:
        return "error"
    if 400 <= status < 500:
        return "rejected" if elapsed <= within else "slow_reject"
    if status >= 500:
        return "server_error"
    if prompt_tokens is not None and prompt_tokens <= context_length:
        return "truncated"
    return "accepted"


def prompt_words(context_length: int) -> int:
    """Return how many one-token filler words overflow a context length whatever the tokenizer: 1.5x + 64.

    Common English words are one token each in the usual tokenizers; the margin covers tokenizers that merge
    a few of them, and the simulator's 4-bytes-per-token count (about 0.83 tokens per word).
    """
    return context_length * 3 // 2 + 64
