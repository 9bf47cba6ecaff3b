"""ServerRecord: what an engine says about one request; and the measured stages it gives a ProbeResult."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sloguard.model import ProbeResult
from sloguard.sources.engines.capabilities import Head

RecordSource = Literal["otlp", "inband"]
# The per-request stages a record measures (ProbeResult field -> stage name in SLO breakdowns).
STAGE_FIELDS: Mapping[str, str] = {
    "network_s": "network", "queue_s": "queue", "prefill_s": "prefill", "server_decode_s": "decode",
}


@dataclass(frozen=True, slots=True)
class ServerRecord:
    """The engine's own timings of one request in seconds (its clock); None where the engine does not say.

    `ttft_s` is the engine's own time to first token, from when it received the request (OTLP spans) or
    queued it (vLLM in-band); network = client TTFT − `ttft_s`.
    """

    source: RecordSource
    engine: str
    ttft_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    e2e_s: float | None = None
    output_tokens: int | None = None
    prompt_tokens: int | None = None


def record_fields(record: ServerRecord | None) -> dict[str, Any]:
    """Return the ProbeResult fields a record fills (network is computed when the result is finalised)."""
    if record is None:
        return {}
    return {"record": record.source, "server_ttft_s": record.ttft_s, "queue_s": record.queue_s,
            "prefill_s": record.prefill_s, "server_decode_s": record.decode_s}


def finalise(result: ProbeResult, record: ServerRecord | None = None,
             head: Head = "unknown") -> tuple[ProbeResult, tuple[str, ...]]:
    """Return the result with its measured stages and the names of stages dropped for being negative.

    A record given here (joined OTLP spans) replaces what the result carried (in-band). Network/HTTP =
    client TTFT − server TTFT. A negative stage is a clock or join bug: it is dropped (None), never stored.
    Failed requests keep no stages (their latencies never enter percentiles). `head`: when the target's engine
    sends its response head (sources.engines.capabilities); a head sent at slot start or with the first token
    is no network time, for a failed request as for a successful one, and at slot start it measures the queue.
    """
    if record is not None:
        result = dataclasses.replace(result, record=record.source, server_ttft_s=record.ttft_s,
                                     queue_s=record.queue_s, prefill_s=record.prefill_s,
                                     server_decode_s=record.decode_s)
    if head == "slot_start":
        result = slot_start_queue(result)
    elif head == "first_token":
        result = dataclasses.replace(result, head_s=None)
    if not result.ok or not result.record:
        return clear_record(result), ()
    network = None
    if result.ttft_s is not None and result.server_ttft_s is not None:
        network = result.ttft_s - result.server_ttft_s
    values = {"network_s": network, "queue_s": result.queue_s, "prefill_s": result.prefill_s,
              "server_decode_s": result.server_decode_s}
    negative = tuple(STAGE_FIELDS[k] for k, v in values.items() if v is not None and v < 0)
    c = {k: (None if v is not None and v < 0 else v) for k, v in values.items()}
    return dataclasses.replace(result, network_s=c["network_s"], queue_s=c["queue_s"], prefill_s=c["prefill_s"],
                               server_decode_s=c["server_decode_s"], head_s=_early_head(result)), negative


def slot_start_queue(result: ProbeResult) -> ProbeResult:
    """Return the result of an engine that sends its head when a slot starts the task, with the queue it measures.

    The head then arrives one round trip plus the server's time to slot start after t0; the TCP handshake of the
    same request measured that round trip (llama-server closes the connection after each stream, so each probe
    opens a new one). Queue = head − handshake (≥ 0), server TTFT = queue + prefill; without a fresh handshake
    (a reused connection) the queue is not measured. The head itself is never the network stage here.
    """
    head, rtt = result.head_raw_s if result.head_raw_s is not None else result.head_s, result.connect_s
    queue = max(0.0, head - rtt) if head is not None and rtt is not None and rtt > 0 and result.ok else None
    server_ttft = queue + result.prefill_s if queue is not None and result.prefill_s is not None else None
    if queue is None or result.queue_s is not None:
        return dataclasses.replace(result, head_s=None)
    return dataclasses.replace(result, head_s=None, queue_s=queue, server_ttft_s=server_ttft)


def _early_head(result: ProbeResult) -> float | None:
    """Return the head time only if it came before the server could have finished its own prefill.

    A head no earlier than the server's queue + prefill was sent with the first output (llama-server does
    this), so it times the server, not the network. The stream's own 1 ms head-to-body test catches that
    on an idle host only: on a busy one the two writes drift apart (measured 2.3 ms), and the record decides.
    """
    head, work = result.head_s, (result.queue_s or 0.0) + (result.prefill_s or 0.0)
    if head is None or result.prefill_s is None or head < work:
        return head
    return None


def clear_record(result: ProbeResult) -> ProbeResult:
    """Return the result without any server record (target configured `server_records: none`, or failed)."""
    if not result.record and result.server_ttft_s is None and all(
            getattr(result, f) is None for f in STAGE_FIELDS):
        return result
    return dataclasses.replace(result, record="", server_ttft_s=None, network_s=None, queue_s=None,
                               prefill_s=None, server_decode_s=None)
