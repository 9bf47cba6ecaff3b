"""What a run does, from the command line: load kind, levels or search, stage size, warm-up (pure)."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from sloguard.bench.order import LoadKind, StageOrder
from sloguard.bench.search import SearchSpec
from sloguard.config.units import parse_duration

Mode = Literal["sweep", "search"]
Arrival = Literal["poisson", "constant"]
MAX_ARRIVALS = 10_000_000
LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}=.{0,200}$")


@dataclass(frozen=True, slots=True)
class StageSize:
    """How long each stage runs: a duration or a request count, after a warm-up of seconds or requests."""

    duration_s: float | None
    requests: int | None
    warmup_s: float = 0.0
    warmup_n: int = 0


@dataclass(frozen=True, slots=True)
class RunPlan:
    """The load of a run: a sweep over `levels` or a search (`search`), every stage of size `size`."""

    mode: Mode
    kind: LoadKind
    levels: tuple[float, ...]
    size: StageSize
    arrival: Arrival = "poisson"
    search: SearchSpec | None = None


def parse_levels(text: str, kind: LoadKind) -> tuple[float, ...]:
    """Return the load levels of `1,4,16` (concurrency: whole numbers ≥ 1; rate: numbers > 0)."""
    out = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"--{kind}: {part.strip()!r} is not a number") from None
        if not math.isfinite(value) or value <= 0 or (kind == "concurrency" and value != int(value)):
            what = "a whole number" if kind == "concurrency" else "a number"
            raise ValueError(f"--{kind}: {part.strip()!r} must be {what} > 0")
        out.append(value)
    return tuple(out)


def parse_warmup(text: str) -> tuple[float, int]:
    """Return (seconds, requests) of a warm-up given as a duration (`10s`) or a request count (`50`)."""
    if text.strip().isdigit():
        return 0.0, int(text)
    try:
        return parse_duration(text), 0
    except ValueError as exc:
        raise ValueError(f"--warmup: {exc}; or give a request count") from None


def parse_labels(items: list[str]) -> dict[str, str]:
    """Return `--label key=value` pairs as a dict (ValueError names the bad item)."""
    out = {}
    for item in items:
        if not LABEL.match(item):
            raise ValueError(f"--label: {item!r} is not key=value (key: letters, digits, _ . -)")
        key, value = item.split("=", 1)
        out[key] = value
    return out


def worker_count(kind: LoadKind, level: float, asked: int | None, cpus: int, streams_per_worker: int,
                 rate_per_worker: float) -> int:
    """Return the worker processes for a load: as asked, else enough that none saturates, ≤ cpus − 1 (≥ 1)."""
    if asked is not None:
        return asked
    need = level / streams_per_worker if kind == "concurrency" else level / rate_per_worker
    return max(1, min(math.ceil(need), cpus - 1))


def arrivals(rate: float, size: StageSize, kind: Arrival, rng: random.Random) -> list[float]:
    """Return a rate stage's send offsets: one arrival process, cut after the warm-up plus the stage's size.

    A timed warm-up lengthens the stage (it lasts warm-up + duration); a counted one is inside the duration.
    """
    out: list[float] = []
    measured = 0
    for i, t in enumerate(_process(rate, kind, rng)):
        warm = i < size.warmup_n or t < size.warmup_s
        if size.duration_s is not None and t >= size.warmup_s + size.duration_s:
            break
        if size.requests is not None and not warm and measured >= size.requests:
            break
        if len(out) >= MAX_ARRIVALS:
            raise ValueError(f"more than {MAX_ARRIVALS} requests in one stage: shorten it or lower the rate")
        out.append(t)
        measured += 0 if warm else 1
    return out


def _process(rate: float, kind: Arrival, rng: random.Random) -> Iterator[float]:
    """Yield arrival offsets forever: exponential gaps (Poisson, first gap included) or i / rate."""
    t, i = 0.0, 0
    while True:
        t = t + rng.expovariate(rate) if kind == "poisson" else i / rate
        yield t
        i += 1


def orders(stage: int, kind: LoadKind, level: float, size: StageSize, workers: int, start_ns: int,
           offsets: list[float]) -> list[StageOrder]:
    """Split one stage between workers: streams and request quotas evenly, arrivals round-robin by seq."""
    warmup_s = size.warmup_s
    end_s = None if size.duration_s is None else warmup_s + size.duration_s
    out = []
    for w in range(workers):
        if kind == "rate":
            mine = tuple((i, t) for i, t in enumerate(offsets) if i % workers == w)
            out.append(StageOrder(stage, kind, start_ns, arrivals=mine, warmup_s=warmup_s, warmup_n=size.warmup_n))
            continue
        streams = _share(int(level), workers, w)
        quota = None if size.requests is None else _share(size.requests, workers, w)
        out.append(StageOrder(stage, kind, start_ns, streams=streams, first_seq=w, stride=workers, end_s=end_s,
                              quota=quota, warmup_s=warmup_s, warmup_n=size.warmup_n))
    return out


def deadline_s(orders: list[StageOrder], size: StageSize, timeout_s: float, slack_s: float) -> float:
    """Return how long after its start a stage can last if every request takes its whole timeout (+ `slack_s`).

    A timed stage: its warm-up and duration, then one request's timeout. A counted one: open loop, the last
    arrival plus one timeout; closed loop, the longest chain one stream of one worker sends back to back (its
    worker's quota and warm-up requests over its streams, after a timed warm-up). A worker that goes quiet
    (a wedged loop, a request its own deadline did not end) cannot hold the run past this.
    """
    per_request = timeout_s + slack_s
    if size.duration_s is not None:
        return size.warmup_s + size.duration_s + per_request
    last = max((t for o in orders for _, t in o.arrivals), default=0.0)
    chains = [math.ceil(((o.quota or 0) + size.warmup_n) / o.streams) for o in orders if o.streams]
    warm = size.warmup_s + per_request if size.warmup_s else 0.0
    return max(last + per_request, warm + max(chains, default=0) * per_request)


def _share(total: int, parts: int, i: int) -> int:
    return total // parts + (1 if i < total % parts else 0)
