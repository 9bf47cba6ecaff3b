"""Per-request columns of a bench results file, filled one validated record at a time.

A request line is decoded straight into a typed record (msgspec: strict JSON, no NaN, every field the report
uses checked in C: a latency is finite seconds under a week, `ok` a JSON boolean, a stage a count) and kept as
~110 bytes of typed arrays, never as a dict: a file of a million requests per side is read in bounded memory
at a few microseconds a line. A violation raises Invalid naming the field (`e2e_s: expected float <= 604800`),
which the reader turns into `FILE:LINE: field: problem`.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec
import numpy as np

from sloguard.reports.data import LATENCY, OUTCOMES, STAGES, Requests, censor, outcome_of
from sloguard.untrusted import MAX_SECONDS, MAX_TEXT, MAX_TIMESTAMP, Invalid

NAN = float("nan")
MAX_BUCKETS = 1000  # distinct prompt buckets one file may name
Seconds = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_SECONDS)]
Label = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]


class RequestRow(msgspec.Struct, kw_only=True):
    """A `request` record (sloguard.bench.schema.REQUEST): its required fields, typed where the report reads them."""

    type: str
    stage: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]
    load_kind: Label
    load: Any
    seq: Any
    worker: Any
    behaviour: Label
    ok: bool  # "false" is a string: a success by truthiness, a failure by intent
    error: str | None
    status_code: Any
    scheduled_s: Any
    sent_s: Any
    send_lag_s: Seconds | None
    ttft_s: Seconds | None
    ttft_sched_s: Seconds | None
    e2e_s: Seconds | None
    e2e_sched_s: Seconds | None
    tpot_s: Seconds | None
    itl_p50_s: Seconds | None
    itl_p99_s: Any
    output_tokens: Any
    prompt_tokens: Any
    prompt_bucket: Label | None
    max_tokens: Any
    good: Any
    ttfot_s: Seconds | None = None
    connect_s: Seconds | None = None
    queue_s: Seconds | None = None
    prefill_s: Seconds | None = None
    network_s: Seconds | None = None
    elapsed_s: Seconds | None = None
    ts: Annotated[float, msgspec.Meta(ge=0.0, le=MAX_TIMESTAMP)] | None = None


DECODER = msgspec.json.Decoder(RequestRow)


def _invalid(exc: msgspec.ValidationError) -> Invalid:
    """Return `field: problem` from msgspec's `Expected ... - at `$.field``."""
    text = str(exc)
    if (m := re.search(r"missing required field `([^`]*)`", text)) is not None:
        return Invalid("missing", m.group(1))
    problem, _, where = text.rpartition(" - at ")
    field = where.strip("`").removeprefix("$.") if where else "line"
    return Invalid((problem or text).replace("`", "").lower().replace(" ", "_")[:60], field)


def decode(line: bytes) -> RequestRow:
    """Return a request line as a checked record; msgspec.DecodeError for JSON, Invalid for a bad field."""
    try:
        return DECODER.decode(line)
    except msgspec.ValidationError as exc:
        raise _invalid(exc) from None


def convert(rec: Mapping[str, Any]) -> RequestRow:
    """Return a request record already parsed (a dict) as a checked record; Invalid for a bad or missing field."""
    try:
        return msgspec.convert(rec, RequestRow)
    except msgspec.ValidationError as exc:
        raise _invalid(exc) from None


# Float columns, in the order each row is appended: the latencies, the stages, then the rest.
FLOATS = (*LATENCY, *(f"stage:{s}" for s in STAGES), "cycle", "ts", "elapsed")
_OUTCOME = {o: i for i, o in enumerate(OUTCOMES)}


class RequestColumns:
    """The columns sloguard.reports.data.Requests holds, appended record by record (one extend per row)."""

    def __init__(self) -> None:
        self._floats, self._ints = array("d"), array("q")  # row-major: len(FLOATS) and 4 values per request
        self._buckets: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._ints) // 4

    def add(self, r: RequestRow) -> None:
        """Append one checked request (open-loop stages use the `*_sched_s` latencies, as the bench judges them)."""
        if r.e2e_s is not None and r.ttft_s is not None and r.e2e_s < r.ttft_s:
            raise Invalid("out_of_range", "e2e_s", "less than ttft_s")
        index = self._buckets.setdefault(r.prompt_bucket or "all", len(self._buckets))
        if len(self._buckets) > MAX_BUCKETS:
            raise Invalid("too_many", "prompt_bucket")
        rate = r.load_kind == "rate"
        ttft, e2e = (r.ttft_sched_s, r.e2e_sched_s) if rate else (r.ttft_s, r.e2e_s)
        decode = None if r.e2e_s is None or r.ttft_s is None else r.e2e_s - r.ttft_s
        ran = r.e2e_s if r.e2e_s is not None else r.elapsed_s  # closed loop: the stream's cycle, free -> free
        cycle = None if rate or r.send_lag_s is None or ran is None else r.send_lag_s + (r.connect_s or 0.0) + ran
        row = (ttft, r.ttfot_s, r.tpot_s, r.itl_p50_s, e2e, r.connect_s, r.queue_s, r.prefill_s, decode,
               r.network_s, cycle, r.ts, r.elapsed_s)
        self._floats.extend([NAN if v is None else v for v in row])
        self._ints.extend((r.ok, _OUTCOME[outcome_of(r.ok, r.error, r.ttft_s)], r.stage, index))

    def requests(self) -> Requests:
        """Return the columns as the report's arrays (failed requests censored as in data.build_requests)."""
        floats = np.frombuffer(self._floats, dtype=np.float64).reshape(-1, len(FLOATS))
        col = {name: np.ascontiguousarray(floats[:, i]) for i, name in enumerate(FLOATS)}
        ints = np.frombuffer(self._ints, dtype=np.int64).reshape(-1, 4)
        ok = ints[:, 0].astype(bool)
        latency = {m: col[m] for m in LATENCY}
        censor(latency, ok)
        names = np.array([*self._buckets, "all"], dtype=object)
        return Requests(latency=latency, stages={s: col[f"stage:{s}"] for s in STAGES}, ok=ok,
                        outcome=np.array(OUTCOMES, dtype=object)[ints[:, 1]], bucket=names[ints[:, 3]],
                        stage=np.ascontiguousarray(ints[:, 2]), ts=col["ts"], cycle=col["cycle"],
                        elapsed=col["elapsed"])
