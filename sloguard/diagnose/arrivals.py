"""The users' own arrivals at a target: the engine's count less sloguard's probes, and a surge's significance.

The engine counts every request it serves, the probes' too. Their fixed schedule is not the users' load: it
adds no Poisson noise, so a users' surge is told from their own healthy rate by its significance
(arrival_surge_z), which needs the users' count alone. Pure and clock-free: `now` comes from the caller. The
probes' prefills (at each first token, as the probe process reports it; the server's prompt-token count once the
result is back) are kept for the users' mean prompt length (signals); the prompt-length p90 is not corrected
(measured: the users' p90 then sat in vLLM's coarse 1,000-2,000 bucket, and long_prompts fell to 2 of 5 right).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from sloguard.diagnose.history import Series

if TYPE_CHECKING:
    from sloguard.diagnose.model import ServerLike

# arrival_surge_z: the users' arrivals over the window's last quarter, half and whole, each against the users'
# healthy rate. A step up in load is most significant over the span it has lasted; the longest span damps noise.
SURGE_SPANS = (0.25, 0.5, 1.0)
MIN_EXPECTED = 1.0  # a Poisson sd of at least 1 request: from a near-zero baseline, one request is not a surge
FULL = 0.9  # a span's scrapes must cover this share of it


def span_end(newest: float | None, now: float, window: float) -> float:
    """Return where a target's spans end: its newest scrape, unless that is stale (else `now`).

    A counter's span starts at the last scrape at or before its start, so a span reaching back from `now` covers
    a scrape interval less when the evaluation comes late in one, and a span that is no whole number of scrape
    intervals can fall under FULL. Ending at the newest scrape absorbs that phase; a scrape older than the share
    of the window FULL leaves uncovered is a target that stopped answering, whose old data must not read as now.
    """
    if newest is None or newest > now or now - newest > (1.0 - FULL) * window:
        return now
    return newest


class ProbeLoad:
    """Per target, sloguard's probe requests of the last `horizon` seconds: start times, and prefills with tokens.

    A prefill is known as its first token comes (`live`, from the probe process, with the prompt's nominal size) and
    again when its result comes back with the server's prompt-token count. Until then, and for good when the probe
    was cut short before its usage chunk, its tokens are the nominal size plus the offset the server's counts of
    that size last showed (a chat template's tokens).
    """

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        self._starts: dict[str, deque[float]] = {}
        self._prefills: dict[str, dict[str, tuple[float, int]]] = {}  # key -> (wall time of first token, tokens)
        self._nominal: dict[str, tuple[str, int]] = {}  # key -> (target, nominal tokens) until its result comes
        self._offset: dict[tuple[str, int], int] = {}  # (target, nominal tokens) -> server's count − nominal
        self._unkeyed = 0

    def observe(self, started: Iterable[tuple[str, float]], now: float,
                prefilled: Iterable[tuple[str, float | None, int | None, str]] = (),
                live: Iterable[tuple[str, str, float, int]] = ()) -> None:
        """Record probe starts and prefills; forget those over the horizon.

        `started`: (target, wall time) as the probe process sent each request; `live`: (target, trace id, wall time,
        nominal prompt tokens) as each first token came; `prefilled`: (target, wall time of the first token or None,
        the server's prompt tokens or None, trace id) as results come back, seconds later and not in order.
        """
        for target, ts in started:
            self._starts.setdefault(target, deque()).append(ts)
        for target, key, ts, nominal in live:
            self._nominal[key] = (target, nominal)
            self._prefills.setdefault(target, {})[key] = (ts, nominal + self._offset.get((target, nominal), 0))
        for target, at, tokens, key in prefilled:
            self._result(target, at, tokens, key)
        for points in self._starts.values():
            while points and points[0] < now - self.horizon:
                points.popleft()
        # results come back out of order: filter, not pop from the left (a few hundred per target at most)
        self._prefills = {t: {k: p for k, p in done.items() if p[0] >= now - self.horizon}
                          for t, done in self._prefills.items()}
        self._nominal = {k: v for k, v in self._nominal.items() if k in self._prefills.get(v[0], {})}

    def _result(self, target: str, at: float | None, tokens: int | None, key: str) -> None:
        """Take one result: the server's count replaces a live estimate; one never seen live is added if counted."""
        got = self._prefills.setdefault(target, {})
        if key in got:
            nominal = self._nominal.pop(key, None)
            if tokens:
                got[key] = (at if at is not None else got[key][0], tokens)
                if nominal is not None:
                    self._offset[nominal] = tokens - nominal[1]
            return  # no count: cut short after its first token, which the engine counted all the same
        if at is not None and tokens:
            if not key:
                self._unkeyed += 1
                key = f"#{self._unkeyed}"
            got[key] = (at, tokens)

    def prefills(self, target: str, window: float, now: float) -> tuple[int, int]:
        """Return the probe prefills whose first token came in (now − window, now]: how many, their prompt tokens."""
        inside = [n for ts, n in self._prefills.get(target, {}).values() if now - window < ts <= now]
        return len(inside), sum(inside)

    def starts(self, target: str, window: float, now: float) -> int:
        """Return how many probe requests to the target started in (now − window, now]."""
        return sum(1 for ts in self._starts.get(target, ()) if now - window < ts <= now)

    def forget(self, keep: Iterable[str]) -> None:
        """Drop the targets not in `keep`."""
        names = set(keep)
        self._starts = {t: v for t, v in self._starts.items() if t in names}
        self._prefills = {t: v for t, v in self._prefills.items() if t in names}
        self._nominal = {k: v for k, v in self._nominal.items() if v[0] in names}


def arrivals(series: Series, server: ServerLike, target: str, finished: Collection[str], window: float,
             now: float, probes: ProbeLoad | None = None) -> tuple[float, float] | None:
    """Return (requests that arrived, seconds) over the window: finished + growth of running and waiting.

    Conservation, not the finish rate: a surge first grows the batch and the queue (fewer finish, not more),
    and an engine that slows down finishes fewer requests without any more arriving; a preempted request moves
    from running to waiting and is no new arrival. `probes`: sloguard's own requests that started over the same
    scrapes are taken out (the users' arrivals).
    """
    # Counters and gauges between the same two scrapes: the gauges are remembered once per evaluation, so their
    # window could start a scrape before the counters' and a batch growing 1 request/s read as arrivals (traces:
    # over 5 s, user arrivals 6 sd over their rate while long prompts jammed the engine and no more arrived).
    ends = series.ends(f"{target}/requests_running", window, now)
    if ends is not None:
        window, now = ends[1] - ends[0], ends[1]
    done = server.increase(target, finished, window, now) if finished else None
    if done is None or done[1] <= 0:
        return None
    grew = sum(series.change(f"{target}/{g}", window, now) or 0.0 for g in ("requests_running", "requests_waiting"))
    own = probes.starts(target, done[1], now) if probes is not None else 0
    return max(0.0, done[0] + grew - own), done[1]


def arrival_surge_z(counts: Iterable[tuple[float, float]], rate: float, learned_over: float = math.inf) -> float:
    """Return the largest arrivals z over (arrived, seconds) spans against a rate learned over `learned_over` s.

    z = (arrived − rate × seconds) / sd, Poisson: users arrive independently, so a span's count varies by
    √expected, and the rate itself was counted over `learned_over` seconds (its error, × seconds, adds
    rate × seconds² / learned_over: a baseline of a 40 s warm-up is ±16% at 1 request/s, of 10 min ±4%). In sd
    units one threshold suits every traffic level: at 1 user request/s a 5 s span expects 5 ± 2.2 and a 3x
    surge brings 15 (z 4.5) while the engine's total with the probes moved 1.6x; at 100/s, +10% over 20 s is
    z 4.5 too. 0 when no span was measured; never negative (fewer arrivals are no surge).
    """
    best = 0.0
    for arrived, seconds in counts:
        expected = rate * seconds
        var = max(expected, MIN_EXPECTED) + rate * seconds * seconds / learned_over
        best = max(best, (arrived - expected) / math.sqrt(var))
    return best


def users(series: Series, server: ServerLike, target: str, finished: Collection[str], window: float, now: float,
          probes: ProbeLoad, baseline: tuple[float, float] | None) -> dict[str, float]:
    """Return user_request_rate (the users' arrivals per second) and, with its baseline, arrival_surge_z.

    A span the scrapes cover less than FULL of is left out: right after start the windows are partial and a
    rate over them is biased (traces: users read 0-0.5/s for 10 s while 1/s arrived, and became a baseline).
    `baseline`: (the users' healthy rate, seconds it was learned over).
    """
    # every span reaches back from the newest scrape (span_end): a quarter that is no whole number of scrape
    # intervals (a 160 s window at 15 s scrapes) fell under FULL when the evaluation came late in one
    newest = series.ends(f"{target}/requests_running", window, now)
    now = span_end(newest[1] if newest is not None else None, now, window)
    spans = {f: got for f in SURGE_SPANS
             if (got := arrivals(series, server, target, finished, window * f, now, probes)) is not None
             and got[1] >= FULL * window * f}
    whole = spans.get(1.0)
    if whole is None:
        return {}
    out = {"user_request_rate": whole[0] / whole[1]}
    if baseline is not None:
        out["arrival_surge_z"] = arrival_surge_z(spans.values(), *baseline)
    return out
