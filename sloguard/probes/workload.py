"""Workload: prompts sized to a target token count, picked by weight, bucketed, with a W3C traceparent."""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass

from sloguard.probes.job import LONG_BUCKET, ProbeJob
from sloguard.traces.ids import probe_span_id

# Common English words that are one token each in the Llama, Mistral, Qwen and GPT tokenizers (with the
# leading space), so N words are close to N tokens; `usage.prompt_tokens` records the real count.
_WORDS = (
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
    "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they",
    "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more",
    "when", "will", "would", "who", "so", "no", "time", "world", "water", "house", "light", "day",
)
_INSTRUCTION = "Continue the list of words."


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: its text, the token count it was sized to, and the bucket label of that size."""

    text: str
    tokens: int
    bucket: str


def filler(tokens: int, nonce: str = "") -> str:
    """Return deterministic text of about `tokens` tokens; `nonce` leads so prefix caches cannot hit."""
    head = f"{nonce} {_INSTRUCTION}" if nonce else _INSTRUCTION
    # the head costs ~8 tokens (~12 with a hex nonce); the rest is filler, one token per word
    budget = max(tokens - (12 if nonce else 8), 1)
    body = " ".join(_WORDS[i % len(_WORDS)] for i in range(budget))
    return f"{head} {body}"


def bucket_for(tokens: int, buckets: tuple[tuple[str, int], ...]) -> str:
    """Return the first bucket whose inclusive upper bound holds `tokens`, else 'long'."""
    for name, upper in sorted(buckets, key=lambda b: b[1]):
        if tokens <= upper:
            return name
    return LONG_BUCKET


def pick_prompt(job: ProbeJob, rng: random.Random) -> Prompt:
    """Pick a prompt size by weight and build its text with a fresh random nonce."""
    sizes = [t for t, _ in job.prompts]
    weights = [w for _, w in job.prompts]
    tokens = rng.choices(sizes, weights=weights, k=1)[0]
    nonce = f"{rng.getrandbits(32):08x}"
    return Prompt(filler(tokens, nonce), tokens, bucket_for(tokens, job.prompt_buckets))


def traceparent() -> tuple[str, str]:
    """Return a W3C `traceparent` header value (sampled) and its 32-hex-digit trace id."""
    trace_id = secrets.token_hex(16)
    span_id = probe_span_id(trace_id)  # the probe's CLIENT span (sloguard.traces.client_spans)
    return f"00-{trace_id}-{span_id}-01", trace_id
