"""Sick-GPU evidence that holds on a busy GPU too: pure functions of NVML readings, every problem named.

`problems` returns, per reason it could evaluate, whether it holds now; a reason whose inputs are absent
(NotSupported) is left out rather than reported as healthy. The NVML source exports the result as
`sloguard_gpu_health_problem{uuid,reason}` (what the built-in alerts watch) and the canary names the same
reasons in its verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

BUSY = 0.5  # utilisation from which a GPU is expected to run at full link speed and clocks
CLOCK_FLOOR = 0.7  # SM clock below this share of its max while busy, with no reason given, is suspicious
HOLD_S = 3600.0  # an ECC increase or critical XID stays a problem this long after it was seen

# XIDs that point at the GPU, its memory, NVLink or the bus rather than at a user program (13, 31, 43 and
# 45 are usually the application's own faults). From NVIDIA's XID catalog.
CRITICAL_XIDS: frozenset[int] = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})

# Clock-event bits (fields.CLOCK_EVENT_REASONS): hardware slowdowns are problems in themselves; the others
# explain low clocks (idle, power cap, application clocks, software thermal, sync boost, display).
HW_SLOWDOWNS: tuple[tuple[int, str], ...] = ((0x008, "hw_slowdown"), (0x040, "hw_thermal_slowdown"),
                                             (0x080, "hw_power_brake"))
EXPLAINED_SLOWDOWN = 0x001 | 0x002 | 0x004 | 0x010 | 0x020 | 0x100

REASONS: tuple[str, ...] = (
    "gpu_lost", "row_remap_pending", "row_remap_failure", "uncorrectable_ecc_increase", "critical_xid",
    "pcie_width_below_max", "pcie_gen_below_max", *(r for _, r in HW_SLOWDOWNS), "clocks_below_max",
)


@dataclass(frozen=True)
class Reading:
    """The readings health needs, from one collection; None where NVML did not give it."""

    busy: float | None = None  # utilisation ratio
    sm_clock: float | None = None  # Hz
    sm_clock_max: float | None = None
    clock_events: int | None = None  # bitmask
    ecc_uncorrected: float | None = None
    remap_pending: float | None = None
    remap_failure: float | None = None
    pcie_gen: float | None = None
    pcie_gen_max: float | None = None
    pcie_width: float | None = None
    pcie_width_max: float | None = None

    @classmethod
    def of(cls, values: Mapping[str, float], clock_events: int | None) -> Reading:
        """Build a Reading from readings keyed by field key (fields.Field.key)."""
        names = set(cls.__dataclass_fields__) - {"clock_events"}
        return cls(clock_events=clock_events, **{k: v for k, v in values.items() if k in names})


@dataclass(frozen=True)
class History:
    """What health remembers between collections of one GPU: the last ECC count, the last increase."""

    ecc_uncorrected: float | None = None
    ecc_increase_at: float | None = None


def _pcie(r: Reading) -> dict[str, bool]:
    out = {}
    if r.pcie_width is not None and r.pcie_width_max:
        out["pcie_width_below_max"] = r.pcie_width < r.pcie_width_max
    if r.pcie_gen is not None and r.pcie_gen_max and r.busy is not None:
        out["pcie_gen_below_max"] = r.busy >= BUSY and r.pcie_gen < r.pcie_gen_max  # idle links step down
    return out


def _clocks(r: Reading) -> dict[str, bool]:
    if r.clock_events is None:
        return {}
    out = {name: bool(r.clock_events & bit) for bit, name in HW_SLOWDOWNS}
    if r.busy is not None and r.sm_clock is not None and r.sm_clock_max:
        out["clocks_below_max"] = (r.busy >= BUSY and r.sm_clock < CLOCK_FLOOR * r.sm_clock_max
                                   and not r.clock_events & (EXPLAINED_SLOWDOWN | sum(b for b, _ in HW_SLOWDOWNS)))
    return out


def step(r: Reading, hist: History, now: float) -> History:
    """Return the history after this reading (an uncorrectable ECC count that grew is stamped `now`)."""
    if r.ecc_uncorrected is None:
        return hist
    grew = hist.ecc_uncorrected is not None and r.ecc_uncorrected > hist.ecc_uncorrected
    return History(r.ecc_uncorrected, now if grew else hist.ecc_increase_at)


def problems(r: Reading, hist: History, now: float, xids: Iterable[tuple[int, float]] = (),
             xids_watched: bool = False) -> dict[str, bool]:
    """Return {reason: holds} for every reason these readings can decide; `hist` must already include `r`.

    `xids` are (xid, last seen) pairs of this GPU; `xids_watched` says XID events are being received at all.
    """
    out: dict[str, bool] = {"gpu_lost": False}
    if r.remap_pending is not None:
        out["row_remap_pending"] = r.remap_pending > 0
    if r.remap_failure is not None:
        out["row_remap_failure"] = r.remap_failure > 0
    if hist.ecc_uncorrected is not None:
        out["uncorrectable_ecc_increase"] = hist.ecc_increase_at is not None and now - hist.ecc_increase_at < HOLD_S
    if xids_watched:
        out["critical_xid"] = any(x in CRITICAL_XIDS and now - ts < HOLD_S for x, ts in xids)
    return out | _pcie(r) | _clocks(r)


def describe(reason: str, r: Reading) -> str:
    """Return a one-line account of a problem with the numbers behind it, for verdicts and logs."""
    details = {
        "pcie_width_below_max": f"PCIe link x{r.pcie_width:g} < max x{r.pcie_width_max:g}" if r.pcie_width_max else "",
        "pcie_gen_below_max": f"PCIe gen {r.pcie_gen:g} < max {r.pcie_gen_max:g} while busy" if r.pcie_gen_max else "",
        "clocks_below_max": (f"SM clock {r.sm_clock / 1e6:.0f} MHz < {CLOCK_FLOOR:g}x max {r.sm_clock_max / 1e6:.0f} "
                             "MHz while busy, no power/thermal reason") if r.sm_clock and r.sm_clock_max else "",
    }
    return details.get(reason) or reason.replace("_", " ")
