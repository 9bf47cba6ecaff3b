"""Stage breakdown of one SLO over one window: where the time went, never negative, no part above its whole.

Sources, best first (DESIGN §4: estimates only where no record exists):
- `request`: stages measured per probe request from the server's own record of it (sloguard.traces):
  network/HTTP = client TTFT − server TTFT, queue, prefill, decode. Exact quantiles of per-request values.
- `probe`: the probe's own per-request stages: connect, ttft, decode (E2E − TTFT), e2e, and, where no record
  gives the network stage, **network = time to the response head** (t0 → status line): the wire both ways
  plus the server's HTTP front until it answers (docs/definitions.md). Exact, per request, ≥ 0.
- `server`: engine histograms of all traffic (queue, prefill; server SLOs also ttft, decode, e2e), as
  intervals that agree with the histogram's own sum and with the whole (sloguard.windows.bounds): a value
  below the first bucket is bounded by the mean, never read as 0.95 × the first bound.
The old network estimate (probe TTFT − server TTFT at the same quantile) compared the probe's requests with
all traffic and went negative; it is gone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from sloguard.model import Histogram
from sloguard.slo.model import SLO, StageSource
from sloguard.slo.result import StageStatus
from sloguard.windows import bounds
from sloguard.windows.bounds import Bounded

STAGE_QS = (0.5, 0.95, 0.99)
PROBE_STAGES = ("connect", "ttft", "decode", "e2e")
SERVER_STAGES_WITH_PROBE = ("queue", "prefill")
SERVER_STAGES = ("queue", "prefill", "ttft", "decode", "e2e")
# Stages measured per request (the server's own record joined by trace id): where a window has them, they
# replace the histogram estimate of the same stage.
REQUEST_STAGES = (("network", "request_network"), ("queue", "request_queue"), ("prefill", "request_prefill"),
                  ("decode", "request_decode"))
HEAD_METRIC = "head"  # probe windows: time to the response head, the network stage without a record
# part -> whole: a part never exceeds its whole at the same quantile (per request part ≤ whole, so every
# quantile of the part ≤ that of the whole). Connect is outside TTFT (t0 is taken once connected).
PART_OF: Mapping[str, str] = {"network": "ttft", "queue": "ttft", "prefill": "ttft", "ttft": "e2e", "decode": "e2e"}

Row = tuple[str, StageSource, tuple[Bounded, ...]]


class QuantileReader(Protocol):
    def quantiles(self, metric: str, qs: Sequence[float]) -> tuple[float, ...] | None:
        """Return the metric's quantiles over one window, or None without data."""
        ...


class HistogramReader(Protocol):
    def histogram(self, metric: str) -> Histogram | None:
        """Return the window's histogram for a signal, or None when empty."""
        ...


def _exact(values: tuple[float, ...] | None) -> tuple[Bounded, ...] | None:
    return None if values is None else tuple(Bounded.exact(v) for v in values)


def _probe_rows(probe: QuantileReader) -> list[Row]:
    rows: list[Row] = []
    for name in PROBE_STAGES:
        got = _exact(probe.quantiles(name, STAGE_QS))
        if got is not None:
            rows.append((name, "probe", got))
    for name, metric in REQUEST_STAGES:
        got = _exact(probe.quantiles(metric, STAGE_QS))
        if got is not None:
            rows.append((name, "request", got))
    if not any(name == "network" for name, _, _ in rows):
        head = _exact(probe.quantiles(HEAD_METRIC, STAGE_QS))
        if head is not None:
            rows.append(("network", "probe", head))
    return rows


def _cap(rows: list[Row]) -> list[Row]:
    """Limit every part to its whole at the same quantile (the probe's own whole where both exist)."""
    wholes: dict[str, tuple[Bounded, ...]] = {}
    for name, source, qs in rows:
        if name not in wholes or source == "probe":
            wholes[name] = qs
    out: list[Row] = []
    for name, source, qs in rows:
        whole = wholes.get(PART_OF.get(name, ""))
        if whole is not None:
            qs = tuple(b.cap(w.value) for b, w in zip(qs, whole, strict=True))
        out.append((name, source, qs))
    return out


def _status(slo: SLO, row: Row, e2e_p50: float | None, window: float, segment: str) -> StageStatus:
    name, source, qs = row
    p50, p95, p99 = (b.value for b in qs)
    budget = slo.budgets.get(name)
    share = p50 / e2e_p50 if e2e_p50 else None
    overrun = p95 / budget if budget else None
    resolution = () if all(b.is_exact for b in qs) else tuple((b.lo, b.hi) for b in qs)
    return StageStatus(name, window, segment, source, p50, p95, p99, budget, share, overrun,
                       resolution=resolution, bounded=any(b.bounded for b in qs))


def breakdown(slo: SLO, probe: QuantileReader | None, server: HistogramReader | None,
              window: float, segment: str) -> list[StageStatus]:
    """Return the SLO's stages over one window (module docstring): measured first, bounded estimates else."""
    rows = _probe_rows(probe) if probe is not None else []
    measured = {name for name, source, _ in rows if source == "request"}
    if server is not None:
        names = SERVER_STAGES_WITH_PROBE if probe is not None else SERVER_STAGES
        for name in names:
            got = None if name in measured else bounds.quantiles(STAGE_QS, server.histogram(name))
            if got is not None:
                rows.append((name, "server", got))
    rows = _cap(rows)
    e2e = next((qs[0].value for name, _, qs in rows if name == "e2e"), None)
    return [_status(slo, row, e2e, window, segment) for row in rows]
