"""A head time survives a server record only when it came before the server's own queue + prefill."""

from __future__ import annotations

import pytest

from sloguard.model import ProbeResult
from sloguard.traces.record import finalise


def _result(head: float | None, queue: float | None, prefill: float | None) -> ProbeResult:
    return ProbeResult(ts=0.0, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=0.05, e2e_s=0.5,
                       record="inband", server_ttft_s=None if prefill is None else (queue or 0.0) + prefill,
                       queue_s=queue, prefill_s=prefill, head_s=head)


@pytest.mark.parametrize(("head", "queue", "prefill", "want"), [
    (0.002, 0.001, 0.030, 0.002),   # head sent on arrival (vLLM): a network time
    (0.0062, None, 0.0021, None),   # llama-server on a busy host: head after its 2.1 ms prefill, 2.3 ms before data
    (0.031, 0.001, 0.030, None),    # exactly when the work ended: sent with the first output
    (0.010, None, None, 0.010),     # a record without prefill decides nothing
    (None, 0.001, 0.030, None),     # no head stamped
])
def test_head_after_the_servers_own_work_is_no_network_time(head: float | None, queue: float | None,
                                                            prefill: float | None, want: float | None) -> None:
    out, negative = finalise(_result(head, queue, prefill))
    assert out.head_s == want and negative == ()
