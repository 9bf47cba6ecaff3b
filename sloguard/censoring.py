"""One request's value per metric: exact, undefined or censored (DESIGN.md §4 "Exact definitions").

A value is exact (≥ 0), undefined (None: never part of that metric's population) or **censored**: the request
ended (timeout, reset, error) before the metric's event, so all we know is "more than b seconds"; it is encoded
as −(1 + b). CENSORING says, per metric, which failed requests are censored and at what bound b. The SLO
windows (sloguard.windows.probe) store this encoding and the probe histograms (sloguard.probes.metrics) count
censored requests in +Inf by the same rules. Decode (e2e − ttft) is derived, never stored: `decode` and
`decode_column` give it in the same encoding.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Literal

import numpy as np

from sloguard.model import ProbeResult

# Metric name -> ProbeResult field; "decode" is derived as e2e − ttft. ITL is the request's p99 gap.
METRICS: Mapping[str, str] = {
    "ttft": "ttft_s", "ttfot": "ttfot_s", "tpot": "tpot_s", "itl": "itl_p99_s", "e2e": "e2e_s",
    "connect": "connect_s",
    # stages measured per request from the server's own record (sloguard.traces), source="request"
    "request_network": "network_s", "request_queue": "queue_s", "request_prefill": "prefill_s",
    "request_decode": "server_decode_s",
    "head": "head_s",  # time to the response head: the network stage where no server record exists
    "decode": "",  # last: the bucket ring appends the derived column after the stored ones
}
# How a failed request counts per metric (metrics not listed: "reached"):
# reached  - exact if the event came before the request ended, else censored at the elapsed time;
# end      - the event is the end of the stream: always censored, at max(elapsed, value seen);
# decoding - per-token metrics: censored (at the value seen so far, else 0) if the first token came,
#            undefined if the request never produced a token (it is judged on ttft/e2e and availability);
# record   - stages from the server's own record of the request: exact when recorded, else undefined.
Censoring = Literal["reached", "end", "decoding", "record"]
CENSORING: Mapping[str, Censoring] = {
    "e2e": "end", "tpot": "decoding", "itl": "decoding",
    "request_network": "record", "request_queue": "record", "request_prefill": "record", "request_decode": "record",
    # a request that got no response head says nothing of the network's share (a head at slot start is no
    # network time at all: traces.record)
    "head": "record",
}
STORED_METRICS = tuple(name for name, attr in METRICS.items() if attr)  # decode is derived, never stored
_READ = attrgetter(*(attr for attr in METRICS.values() if attr))


def elapsed(result: ProbeResult) -> float:
    """Return how long the request ran: elapsed_s, or for rows stored before it existed the latest timing seen."""
    if result.elapsed_s is not None:
        return result.elapsed_s
    return max((v for v in (result.connect_s, result.ttft_s, result.ttfot_s, result.e2e_s) if v is not None),
               default=0.0)


def censored(bound: float) -> float:
    """Return the stored encoding of "more than `bound` seconds": −(1 + bound)."""
    return -1.0 - max(0.0, bound)


def _failed_value(metric: str, value: float | None, result: ProbeResult, ran: float) -> float | None:
    rule = CENSORING.get(metric, "reached")
    if rule == "reached":
        return value if value is not None else censored(ran)
    if rule == "end":
        return censored(max(ran, value or 0.0))
    if rule == "record":
        return value
    return None if result.ttft_s is None else censored(value or 0.0)


def censored_metrics(result: ProbeResult) -> dict[str, float]:
    """Return metric -> lower bound (seconds) for each metric a failed request is censored in (ok: none)."""
    if result.ok:
        return {}
    stored = dict(zip(STORED_METRICS, encode(result), strict=True))
    return {m: -v - 1.0 for m, v in stored.items() if v is not None and v < 0}


def encode(result: ProbeResult) -> tuple[float | None, ...]:
    """Return the stored metric values of one request: exact, None (undefined) or censored (negative)."""
    values = _READ(result)
    if result.ok:
        return tuple(values)
    ran = elapsed(result)
    return tuple(_failed_value(m, v, result, ran) for m, v in zip(STORED_METRICS, values, strict=True))


def decode(e2e: float | None, ttft: float | None) -> float | None:
    """Return one request's decode as decode_column encodes it (None: undefined)."""
    if ttft is None or e2e is None or ttft < 0:
        return None
    return e2e - ttft if e2e >= 0 else censored(-e2e - 1.0 - ttft)


def decode_column(e2e: np.ndarray, ttft: np.ndarray) -> np.ndarray:
    """Return decode = e2e − ttft, censored at e2e's bound − ttft where e2e is censored and ttft exact."""
    out: np.ndarray = e2e - ttft
    with np.errstate(invalid="ignore"):
        rows = np.flatnonzero(np.minimum(e2e, ttft) < 0)  # a censored side (NaN compares False): rare
    if rows.size:
        e, t = e2e[rows], ttft[rows]
        with np.errstate(invalid="ignore"):
            out[rows] = np.where((e < 0) & (t >= 0), -1.0 - np.maximum(0.0, -e - 1.0 - t), np.nan)
    return out
