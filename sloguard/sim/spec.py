"""Speculative-decoding counters of the simulated vLLM server (`--spec-tokens K`), as vLLM V1 exports them.

Each decode step of each request is one draft of K tokens; the target model accepts them one after the
other, each with probability `spec_acceptance` (a fault knob), and stops at the first rejection. The
counters follow `vllm/v1/spec_decode/metrics.py`: `vllm:spec_decode_num_drafts`, `_num_draft_tokens`,
`_num_accepted_tokens` and `_num_accepted_tokens_per_pos{position}`. Only the counters are modelled: the
simulator still emits one token per step, so acceptance does not change its timing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter


class SpecDecode:
    """Draws each draft's accepted length from a seeded stream and counts it."""

    def __init__(self, k: int, rng: random.Random, acceptance: Callable[[], float], registry: CollectorRegistry,
                 labels: tuple[str, ...], values: Sequence[str]) -> None:
        self.k, self._rng, self._acceptance = k, rng, acceptance
        self.drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels,
                              registry=registry).labels(*values)
        self.draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels,
                                    registry=registry).labels(*values)
        self.accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels,
                                registry=registry).labels(*values)
        per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                          (*labels, "position"), registry=registry)
        self.per_pos = [per_pos.labels(*values, str(i)) for i in range(k)]

    def draft(self) -> int:
        """Count one draft of one request; return how many of its tokens were accepted."""
        p = self._acceptance()
        accepted = 0
        while accepted < self.k and self._rng.random() < p:
            self.per_pos[accepted].inc()
            accepted += 1
        self.drafts.inc()
        self.draft_tokens.inc(self.k)
        self.accepted.inc(accepted)
        return accepted
