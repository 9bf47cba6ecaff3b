"""Build bench RequestRecords for pure tests."""

from __future__ import annotations

from typing import Any

from sloguard.bench.record import RequestRecord
from sloguard.model import ProbeResult


def rec(seq: int = 0, ok: bool = True, ttft: float | None = 0.1, e2e: float | None = 0.5, tpot: float | None = 0.01,
        scheduled: float | None = None, sent: float | None = None, ended: float | None = None, warmup: bool = False,
        output_tokens: int | None = 41, error: str | None = None, behaviour: str = "normal", **result: Any,
        ) -> RequestRecord:
    """Return a record; by default request `seq` is scheduled and sent at `seq` seconds."""
    scheduled = float(seq) if scheduled is None else scheduled
    sent = scheduled if sent is None else sent
    ended = sent + (e2e or 0.0) if ended is None else ended
    r = ProbeResult(ts=0.0, probe="bench", target="sim", model="m", api="chat", ok=ok,
                    error=error if error is not None or ok else "http 503: busy", connect_s=0.0,
                    ttft_s=ttft if ok else None, e2e_s=e2e if ok else None, tpot_s=tpot if ok else None,
                    output_tokens=output_tokens if ok else None, **result)
    return RequestRecord(stage=0, seq=seq, worker=0, behaviour=behaviour, max_tokens=64, scheduled_s=scheduled,
                         sent_s=sent, t0_s=sent, ended_s=ended, warmup=warmup, result=r)
