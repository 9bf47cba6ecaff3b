"""The time to the response head: a network stage only where the server answers its head before its output."""

from __future__ import annotations

import pytest

from sloguard.probes.result import Stamps, head_time

MS = 1_000_000


@pytest.mark.parametrize(("head_ms", "body_ms", "expected"), [
    (3.0, 150.0, 0.003),   # head right away, first output after prefill (vLLM, the simulator)
    (203.0, 350.0, 0.203),  # a 200 ms network delay before the server saw the request
    (3.9, 4.4, None),       # head sent with the first output (llama-server): a TTFT, not a network time
    (3.0, 0.0, 0.003),      # no body (an error page): the head still came first
    (0.0, 5.0, None),       # no head stamp (the arrival hook missed it)
])
def test_head_time(head_ms: float, body_ms: float, expected: float | None) -> None:
    t0 = 1000 * MS
    stamps = Stamps(t0_ns=t0, head_ns=t0 + int(head_ms * MS) if head_ms else 0,
                    body_ns=t0 + int(body_ms * MS) if body_ms else 0)
    got = head_time(stamps)
    assert got == (None if expected is None else pytest.approx(expected))
