"""What the diagnosis remembers between evaluations: healthy baselines, counter and gauge series (pure, clock-free).

Every method takes `now` from its caller (the daemon's injected clock), so tests replay any timeline.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import deque
from collections.abc import Collection, Iterable, Mapping

MIN_POINTS = 8  # healthy evaluations before a baseline is used (one noisy evaluation cannot set it)
MAX_POINTS = 720  # values kept per key (the last 720 healthy evaluations: 3 h at 15 s, 12 min at 1 s)


class Baselines:
    """Per key, the values seen at healthy evaluations within `horizon` (the last MAX_POINTS); baseline = median.

    The keys in `means` take the mean instead: a mean over a window of a right-skewed quantity (the users' prompt
    lengths) is itself right-skewed, so the median of such means sits below the mean they estimate (prompts.py).

    Each value summarises the diagnosis window, so values from evaluations less than a window apart share most
    of their data: a baseline is used once its values span `min_span` (the service passes the window), i.e.
    once it rests on at least two windows with no request in common, not on one window read 8 times.

    The median leaves out the newest values: those of the last third of the history, at most `adopt` seconds
    (default a quarter of the horizon). A fault that slows things without breaching yet (a CPU-bound neighbour
    creeping up) records "healthy" values; with a plain median over a short history (sloguard started minutes
    ago) they became the baseline as soon as they outnumbered the healthy ones, and the breach that followed
    compared with the faulted level ("no known cause", benchmark traces). A new level is adopted only once it
    has lasted a third of the history, and at most `adopt`. Until the settled values alone would make a
    baseline (a young or fragmented history), all of them do: a baseline that may have begun to adapt is
    better than none (traces: a run whose healthy evaluations came in bursts had no baseline for 75 s).
    """

    def __init__(self, horizon: float, min_points: int = MIN_POINTS, min_span: float = 0.0,
                 adopt: float | None = None, means: Collection[str] = ()) -> None:
        self.horizon = horizon
        self.means = frozenset(means)
        self.min_points = min_points
        self.min_span = min_span
        self.adopt = horizon / 4 if adopt is None else adopt
        self._points: dict[str, deque[tuple[float, float]]] = {}

    def record(self, now: float, values: Mapping[str, float]) -> None:
        """Add one healthy evaluation's values and forget those older than the horizon (or MAX_POINTS back)."""
        for key, value in values.items():
            points = self._points.setdefault(key, deque(maxlen=MAX_POINTS))
            points.append((now, value))
        for points in self._points.values():
            while points and points[0][0] < now - self.horizon:
                points.popleft()

    def get(self, key: str) -> float | None:
        """Return the key's baseline, or None before `min_points` settled healthy values spanning `min_span`."""
        used = self._used(key)
        if used is None:
            return None
        centre = statistics.fmean if key in self.means else statistics.median
        return float(centre(v for _, v in used))

    def ready_in(self, keys: Collection[str]) -> float:
        """Return the seconds until every key has a baseline, at one healthy evaluation per second at most (0 = ready).

        A key with no value yet needs `min_span` of healthy evaluations; one with values, what its span lacks.
        """
        left = 0.0
        for key in keys:
            if self._used(key) is not None:
                continue
            points = self._points.get(key)
            spanned = points[-1][0] - points[0][0] if points else 0.0
            needed = self.min_points - (len(points) if points else 0)
            left = max(left, self.min_span - spanned, float(needed))
        return left

    def span(self, key: str) -> float | None:
        """Return the seconds between the oldest and newest value behind the key's baseline (None: no baseline)."""
        used = self._used(key)
        return None if used is None else used[-1][0] - used[0][0]

    def _used(self, key: str) -> list[tuple[float, float]] | None:
        points = self._points.get(key)
        if not points:
            return None
        newest = points[-1][0]
        settled = newest - min(self.adopt, (newest - points[0][0]) / 3)
        for values in ([(ts, v) for ts, v in points if ts <= settled], list(points)):
            if len(values) >= self.min_points and values[-1][0] - values[0][0] >= self.min_span:
                return values
        return None

    def all(self, keys: Iterable[str] | None = None) -> dict[str, float]:
        """Return every learned baseline (of `keys` only, if given)."""
        out = {}
        for key in self._points if keys is None else keys:
            value = self.get(key)
            if value is not None:
                out[key] = value
        return out


class Series:
    """Timestamped values per key (counters and gauges) kept for `horizon` seconds."""

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        self._points: dict[str, deque[tuple[float, float]]] = {}

    def add(self, key: str, ts: float, value: float) -> None:
        """Record a value; a timestamp not newer than the last one of the key is ignored (same scrape twice)."""
        points = self._points.setdefault(key, deque())
        if points and ts <= points[-1][0]:
            return
        points.append((ts, value))
        while len(points) > 2 and points[1][0] < ts - self.horizon:
            points.popleft()

    def _since(self, key: str, window: float, now: float) -> list[tuple[float, float]]:
        points = self._points.get(key, ())
        base = [p for p in points if p[0] <= now - window]
        inside = [p for p in points if now - window < p[0] <= now]
        return base[-1:] + inside

    def increase(self, key: str, window: float, now: float) -> tuple[float, float] | None:
        """Return (increase, seconds) of a counter over the window; a value that went down restarts the count."""
        points = self._since(key, window, now)
        if len(points) < 2:
            return None
        total = 0.0
        for (_, a), (_, b) in itertools.pairwise(points):
            total += b - a if b >= a else b
        return total, points[-1][0] - points[0][0]

    def rate(self, key: str, window: float, now: float) -> float | None:
        """Return a counter's increase per second over the window, or None without two points."""
        got = self.increase(key, window, now)
        return None if got is None or got[1] <= 0 else got[0] / got[1]

    def newest_rate(self, key: str, window: float, now: float) -> float | None:
        """Return a counter's increase per second between its two newest points in the window, or None."""
        points = [p for p in self._points.get(key, ()) if now - window < p[0] <= now][-2:]
        if len(points) < 2 or points[1][0] <= points[0][0]:
            return None
        (ta, a), (tb, b) = points
        return (b - a if b >= a else b) / (tb - ta)

    def ends(self, key: str, window: float, now: float) -> tuple[float, float] | None:
        """Return the timestamps of the first and last point `change` would use, or None without two points."""
        points = self._since(key, window, now)
        return (points[0][0], points[-1][0]) if len(points) >= 2 else None

    def change(self, key: str, window: float, now: float) -> float | None:
        """Return a gauge's last value minus its value at the window's start, or None without two points."""
        points = self._since(key, window, now)
        return points[-1][1] - points[0][1] if len(points) >= 2 else None

    def mean(self, key: str, window: float, now: float) -> float | None:
        """Return the mean of a gauge's values inside the window, or None without any."""
        inside = [v for ts, v in self._points.get(key, ()) if now - window < ts <= now]
        return sum(inside) / len(inside) if inside else None

    def max(self, key: str, window: float, now: float) -> float | None:
        """Return the largest of a gauge's values inside the window, or None without any."""
        inside = [v for ts, v in self._points.get(key, ()) if now - window < ts <= now]
        return max(inside) if inside else None

    def last(self, key: str, now: float) -> float | None:
        """Return the newest value at or before `now`, or None without any."""
        before = [v for ts, v in self._points.get(key, ()) if ts <= now]
        return before[-1] if before else None

    def quantile(self, key: str, q: float, window: float, now: float) -> float | None:
        """Return the q-quantile (nearest rank) of a gauge's values inside the window, or None without any.

        The high quantile of the scrapes, not their mean: at q = 0.9 it is at least x when x was reached at 10%
        of the window's scrapes, so a state that just began (or dips at some scrapes) shows within a tenth of
        the window, and one scrape cannot set it.
        """
        inside = sorted(v for ts, v in self._points.get(key, ()) if now - window < ts <= now)
        if not inside:
            return None
        return inside[min(len(inside) - 1, max(0, math.ceil(q * len(inside)) - 1))]

    def forget(self, keep: Iterable[str]) -> None:
        """Drop the series whose key is not in `keep` (removed targets, processes)."""
        keys = set(keep)
        for key in [k for k in self._points if k not in keys]:
            del self._points[key]
