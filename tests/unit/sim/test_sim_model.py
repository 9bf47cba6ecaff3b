"""Pure latency model: step costs, output lengths, prompt token counts."""

from __future__ import annotations

import random

import pytest

from sloguard.sim.model import (
    LatencyProfile,
    chat_tokens,
    decode_seconds,
    output_length,
    prefill_seconds,
    prompt_tokens,
    step_seconds,
)

P = LatencyProfile(jitter_sigma=0.0)


@pytest.mark.parametrize(("tokens", "batch", "expected"), [
    (0, 0, 0.0), (256, 0, 0.020 + 0.0002 * 256), (0, 1, 0.0125), (0, 32, 0.012 + 0.0005 * 32),
    (100, 8, 0.020 + 0.02 + 0.012 + 0.004),
])
def test_step_seconds_is_prefill_plus_decode(tokens: int, batch: int, expected: float) -> None:
    assert step_seconds(P, tokens, batch, 1.0, random.Random(0)) == pytest.approx(expected)
    assert prefill_seconds(P, tokens) + decode_seconds(P, batch) == pytest.approx(expected)


def test_multiplier_and_scale() -> None:
    assert step_seconds(P, 0, 1, 4.0, random.Random(0)) == pytest.approx(0.05)
    assert step_seconds(P.scaled(0.1), 0, 1, 1.0, random.Random(0)) == pytest.approx(0.00125)


def test_jitter_is_bounded_and_seeded() -> None:
    p = LatencyProfile(jitter_sigma=0.03)

    def draws(seed: int) -> list[float]:
        rng = random.Random(seed)
        return [step_seconds(p, 0, 1, 1.0, rng) / 0.0125 for _ in range(1000)]

    values = draws(5)
    assert min(values) > 0.85 and max(values) < 1.15 and len(set(values)) > 900
    assert values == draws(5) != draws(6)


@pytest.mark.parametrize(("max_tokens", "ignore_eos"), [(1, False), (64, True), (64, False), (2, False)])
def test_output_length_within_max(max_tokens: int, ignore_eos: bool) -> None:
    rng = random.Random(3)
    for _ in range(200):
        n, reason = output_length(max_tokens, ignore_eos, rng)
        assert 1 <= n <= max_tokens
        assert reason == ("length" if n == max_tokens else "stop")
        assert not ignore_eos or n == max_tokens


def test_output_length_stops_early_sometimes() -> None:
    rng = random.Random(3)
    reasons = {output_length(64, False, rng)[1] for _ in range(50)}
    assert reasons == {"stop", "length"}


@pytest.mark.parametrize(("prompt", "tokens"), [
    ("abcd", 1), ("abcde", 2), ("x" * 400, 100), ([5] * 37, 37), (["abcdefgh", "zz"], 2), ("é" * 2, 1),
])
def test_prompt_tokens(prompt: object, tokens: int) -> None:
    assert prompt_tokens(prompt) == tokens


@pytest.mark.parametrize(("messages", "tokens"), [
    ([{"role": "user", "content": "x" * 40}], 13),
    ([{"role": "system", "content": ""}, {"role": "user", "content": "abcd"}], 7),
    ([{"role": "user", "content": [{"type": "text", "text": "x" * 8}]}], 5),
])
def test_chat_tokens_add_template(messages: object, tokens: int) -> None:
    assert chat_tokens(messages) == tokens


@pytest.mark.parametrize("bad", [None, 5, [], [1.5]])
def test_bad_prompts_raise(bad: object) -> None:
    with pytest.raises(ValueError):
        prompt_tokens(bad)
