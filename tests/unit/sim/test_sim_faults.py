"""Fault JSON merging and validation, seeded decisions, junk bodies."""

from __future__ import annotations

import random

import pytest

from sloguard.sim.faults import Faults, garbage_body, merge, roll


@pytest.mark.parametrize(("payloads", "expected"), [
    ([{"latency_multiplier": 3}], Faults(latency_multiplier=3.0)),
    ([{"error_rate": 0.2}, {"stall_first_token_s": 0.4}], Faults(error_rate=0.2, stall_first_token_s=0.4)),
    ([{"hang": True}, {"hang": False}], Faults()),
    ([{"garbage_metrics": "binary", "midstream_error_rate": 1}],
     Faults(garbage_metrics="binary", midstream_error_rate=1.0)),
    ([{}], Faults()),
    ([{"leak_on_cancel": True, "oversized_prompt": "hang"}], Faults(leak_on_cancel=True, oversized_prompt="hang")),
    ([{"prefix_hit_ratio": 0.1}, {"prefix_hit_ratio": None}], Faults()),
    ([{"spec_acceptance": 0.2, "oversized_reject_delay_s": 2}],
     Faults(spec_acceptance=0.2, oversized_reject_delay_s=2.0)),
])
def test_merge(payloads: list[dict[str, object]], expected: Faults) -> None:
    faults = Faults()
    for p in payloads:
        faults = merge(faults, p)
    assert faults == expected


@pytest.mark.parametrize(("payload", "message"), [
    ({"nope": 1}, "unknown fault keys: nope"), ({"error_rate": 1.5}, "error_rate"),
    ({"latency_multiplier": 0}, "latency_multiplier"), ({"hang": 1}, "hang"),
    ({"stall_first_token_s": True}, "stall_first_token_s"), ({"garbage_metrics": "xml"}, "garbage_metrics"),
    ([], "JSON object"), ({"oversized_prompt": "ignore"}, "oversized_prompt: expected one of reject, hang"),
    ({"leak_on_cancel": "yes"}, "leak_on_cancel"), ({"prefix_hit_ratio": 2}, "prefix_hit_ratio"),
])
def test_merge_rejects(payload: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        merge(Faults(), payload)


@pytest.mark.parametrize(("rate", "hits"), [(0.0, 0), (1.0, 1000)])
def test_roll_edges(rate: float, hits: int) -> None:
    rng = random.Random(0)
    assert sum(roll(rate, rng) for _ in range(1000)) == hits


def test_roll_rate_is_seeded_and_close() -> None:
    first = [roll(0.2, r) for r in [random.Random(9)] for _ in range(2000)]
    again = [roll(0.2, r) for r in [random.Random(9)] for _ in range(2000)]
    assert first == again and 300 < sum(first) < 500


@pytest.mark.parametrize(("mode", "ctype"), [(True, "text/html"), ("html", "text/html"),
                                             ("binary", "application/octet-stream")])
def test_garbage_body(mode: bool | str, ctype: str) -> None:
    body, content_type = garbage_body(mode, random.Random(0))
    assert content_type.startswith(ctype) and body and b"vllm:" not in body
