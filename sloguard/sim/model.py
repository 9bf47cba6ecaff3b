"""Pure latency model of the simulated engine: step durations, output lengths, prompt sizes.

The simulator runs a continuous-batching loop (`engine.py`). One engine step prefills the requests
admitted in it and decodes one token for every request already past prefill; it lasts

    step_s = [prefill_base_s + prefill_per_token_s · Σ uncached prompt tokens]   (if any prefill)
           + [decode_base_s  + decode_per_seq_s   · decoding batch size]         (if any decode)

multiplied by the fault `latency_multiplier` and by a seeded log-normal jitter
exp(N(0, jitter_sigma)) (default σ = 0.03, so 95% of steps within ±6%). A prefill step emits the
request's first token, so on an idle server with no fault:

    TTFT = stall_first_token_s + prefill_base_s + prefill_per_token_s · prompt_tokens   (± jitter)
    TPOT = decode_base_s + decode_per_seq_s · 1                                           (± jitter)

With the defaults, a 256-token prompt takes 20 + 0.2·256 = 71.2 ms to first token and each later token
12.5 ms; at a batch of 32 a decode step takes 28 ms. Admission is FIFO up to `max_batch` running
requests and `max_batched_tokens` prefill tokens per step. KV cache: `kv_blocks` blocks of `block_size`
tokens; a request that no longer fits is preempted (recomputed later) like vLLM V1.

Capacity (what `sloguard bench` is tested against, tests/e2e/test_bench_sim.py): at most `max_batch`
requests run at once, so with N closed-loop clients and N > max_batch every request waits in the queue
for a running one to finish (the knee of a concurrency sweep: server queue time ≈ 0 up to max_batch,
then (N − max_batch) · S / max_batch by Little's law, S = one request's time in the batch). With B
requests decoding, output length M and prompt P, the mean step is about

    step ≈ decode_base_s + decode_per_seq_s · B + (B / M) · (prefill_base_s + prefill_per_token_s · P)

(B / M requests are admitted per step), and the most requests per second it can serve is B / (M · step).
Steps follow model time (scheduler.py), so the host's speed does not change these figures.

Prompt size: token-id lists count one per id; text counts ceil(UTF-8 bytes / 4), plus 3 per chat
message (the chat template). Client requests never hit the prefix cache; background requests
reuse `prefix_hit_ratio` of their prompt. Same seed, same sequence of decisions.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Any

CHAT_TEMPLATE_TOKENS_PER_MESSAGE = 3
BYTES_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class LatencyProfile:
    """Parameters of the engine's cost model; all times in seconds."""

    prefill_base_s: float = 0.020
    prefill_per_token_s: float = 0.0002
    decode_base_s: float = 0.012
    decode_per_seq_s: float = 0.0005
    jitter_sigma: float = 0.03
    max_batch: int = 32
    max_batched_tokens: int = 8192
    kv_blocks: int = 4096
    block_size: int = 16
    prefix_hit_ratio: float = 0.25

    def scaled(self, factor: float) -> LatencyProfile:
        """Return the profile with every time parameter multiplied by `factor` (for fast tests)."""
        return LatencyProfile(**{
            **asdict(self),
            "prefill_base_s": self.prefill_base_s * factor,
            "prefill_per_token_s": self.prefill_per_token_s * factor,
            "decode_base_s": self.decode_base_s * factor,
            "decode_per_seq_s": self.decode_per_seq_s * factor,
        })

    def as_json(self) -> dict[str, Any]:
        """Return the parameters as a JSON-ready dict."""
        return asdict(self)


def prefill_seconds(profile: LatencyProfile, computed_tokens: int) -> float:
    """Return the prefill part of a step that computes `computed_tokens` new tokens (0 when none)."""
    if computed_tokens <= 0:
        return 0.0
    return profile.prefill_base_s + profile.prefill_per_token_s * computed_tokens


def decode_seconds(profile: LatencyProfile, batch: int) -> float:
    """Return the decode part of a step over `batch` sequences (0 when none)."""
    if batch <= 0:
        return 0.0
    return profile.decode_base_s + profile.decode_per_seq_s * batch


def step_seconds(
    profile: LatencyProfile, computed_tokens: int, batch: int, multiplier: float, rng: random.Random
) -> float:
    """Return one engine step's duration; draws one jitter value from `rng` per call."""
    base = prefill_seconds(profile, computed_tokens) + decode_seconds(profile, batch)
    jitter = math.exp(rng.gauss(0.0, profile.jitter_sigma)) if profile.jitter_sigma > 0 else 1.0
    return base * multiplier * jitter


def output_length(max_tokens: int, ignore_eos: bool, rng: random.Random) -> tuple[int, str]:
    """Return (tokens to generate, finish reason); without ignore_eos half the requests stop early."""
    if ignore_eos or max_tokens <= 1 or rng.random() < 0.5:
        return max_tokens, "length"
    return rng.randint(1, max_tokens - 1), "stop"


def text_tokens(text: str) -> int:
    """Return the token count of a text: ceil(UTF-8 bytes / 4), at least 1."""
    return max(1, math.ceil(len(text.encode()) / BYTES_PER_TOKEN))


def prompt_tokens(prompt: object) -> int:
    """Return the token count of a completions `prompt` (text, token ids, or a list of texts)."""
    if isinstance(prompt, str):
        return text_tokens(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and prompt:
        return prompt_tokens(prompt[0])
    raise ValueError("prompt must be a string, a list of token ids or a list of strings")


def chat_tokens(messages: object) -> int:
    """Return the token count of chat `messages` including the template's per-message tokens."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    total = 0
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):  # OpenAI content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        total += (text_tokens(content) if isinstance(content, str) and content else 0)
        total += CHAT_TEMPLATE_TOKENS_PER_MESSAGE
    return total


def blocks_for(profile: LatencyProfile, tokens: int) -> int:
    """Return the KV blocks that `tokens` tokens occupy."""
    return math.ceil(tokens / profile.block_size)
