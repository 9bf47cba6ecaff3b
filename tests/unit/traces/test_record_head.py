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


def _llama(ok: bool, head_raw: float | None, connect: float | None, ttft: float | None = 2.13,
           prefill: float | None = 0.02) -> ProbeResult:
    """A llama-server probe: in-band timings (prefill) only, its head sent when a slot started the task."""
    return ProbeResult(ts=0.0, probe="p", target="t", model="m", api="chat", ok=ok, ttft_s=ttft if ok else None,
                       e2e_s=2.5 if ok else None, record="inband" if ok else "", prefill_s=prefill if ok else None,
                       server_decode_s=0.3 if ok else None, connect_s=connect, head_s=None, head_raw_s=head_raw,
                       error=None if ok else "timeout")


@pytest.mark.parametrize(("result", "queue", "network"), [
    # 2.11 s queued behind 16 streams on 2 slots: head at 2.1108 s, the handshake 0.8 ms
    (_llama(True, 2.1108, 0.0008), 2.11, 2.13 - 2.11 - 0.02),
    (_llama(True, 0.0028, 0.0009), 0.0019, 2.13 - 0.0019 - 0.02),  # idle: the head − RTT is the HTTP front only
    (_llama(True, 0.150, 0.151), 0.0, 2.13 - 0.02),  # a delay on the wire: both carry it, the queue none
    (_llama(True, 1.2, None), None, None),  # a reused connection: no handshake to subtract, nothing measured
])
def test_a_head_at_slot_start_measures_the_queue(result: ProbeResult, queue: float | None,
                                                network: float | None) -> None:
    out, negative = finalise(result, head="slot_start")
    assert negative == () and out.head_s is None  # never the network stage
    assert out.queue_s == (None if queue is None else pytest.approx(queue))
    assert out.network_s == (None if network is None else pytest.approx(network))


@pytest.mark.parametrize("head", ["slot_start", "first_token"])
def test_a_failed_requests_head_follows_the_same_rule(head: str) -> None:
    """Timed-out probes kept heads of 3.06-3.90 s (their queue) and read as 100% network time (issue 48)."""
    out, _ = finalise(_llama(False, 3.5, 0.0008), head=head)  # type: ignore[arg-type]
    assert (out.head_s, out.queue_s, out.network_s) == (None, None, None)
