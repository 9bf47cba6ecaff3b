"""One bench request as measured: the probe's ProbeResult plus when it was scheduled and actually sent.

Coordinated omission: every request has a scheduled time (open loop: its planned arrival; closed loop:
when its stream became free). `send_lag_s` = actual send − scheduled, and the `*_sched_s` latencies run
from the scheduled time, so a client that falls behind shows its delay in them instead of hiding it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sloguard.model import LIVE_ONLY_FIELDS, ProbeResult

NS = 1e-9


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One measured request; times in seconds from the stage's start on the shared monotonic clock."""

    stage: int
    seq: int  # index of the request in the stage's seeded workload
    worker: int
    behaviour: str
    max_tokens: int
    scheduled_s: float
    sent_s: float  # when the probe call began (after any client delay)
    t0_s: float  # when the request was written (the probe's t0; connect time excluded)
    ended_s: float  # when the probe call returned
    warmup: bool
    result: ProbeResult

    @property
    def send_lag_s(self) -> float:
        """Return the client's own delay: actual send − scheduled send (≥ 0 up to clock resolution)."""
        return self.sent_s - self.scheduled_s

    @property
    def ttft_sched_s(self) -> float | None:
        """Return TTFT measured from the scheduled send time (includes client lag and connect)."""
        ttft = self.result.ttft_s
        return None if ttft is None else self.t0_s + ttft - self.scheduled_s

    @property
    def e2e_sched_s(self) -> float | None:
        """Return E2E measured from the scheduled send time (includes client lag and connect)."""
        e2e = self.result.e2e_s
        return None if e2e is None else self.t0_s + e2e - self.scheduled_s


def t0_offset(result: ProbeResult, sent_ns: int) -> int:
    """Return the request's t0 in ns: the probe's own stamp (when the request was written), else the send
    stamp plus its connect time (then `*_sched_s` can be low by the request's build time, never high)."""
    return result.t0_ns or sent_ns + int((result.connect_s or 0.0) * 1e9)


def to_json(rec: RequestRecord, good: dict[str, bool], load_kind: str, load: float) -> dict[str, Any]:
    """Return the results-file row of one request (schema: sloguard.bench.schema, `type: request`)."""
    row = {k: v for k, v in asdict(rec.result).items() if k not in LIVE_ONLY_FIELDS}
    row.update({
        "type": "request", "stage": rec.stage, "load_kind": load_kind, "load": load, "seq": rec.seq,
        "worker": rec.worker, "behaviour": rec.behaviour, "max_tokens": rec.max_tokens,
        "scheduled_s": _r(rec.scheduled_s), "sent_s": _r(rec.sent_s), "send_lag_s": _r(rec.send_lag_s),
        "ttft_sched_s": _r(rec.ttft_sched_s), "e2e_sched_s": _r(rec.e2e_sched_s), "good": good,
    })
    return row


def _r(value: float | None) -> float | None:
    """Round to the nanosecond so files do not carry float noise."""
    return None if value is None else round(value, 9)
