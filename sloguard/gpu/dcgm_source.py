"""dcgm source: scrape an NVIDIA dcgm-exporter `/metrics` and map its DCGM_FI_* fields onto `sloguard_gpu_*`.

One source per target with `dcgm_url` (the GPUs serving that target: a cluster-wide sloguard sees GPUs it
cannot open through NVML this way). Field map: `sloguard.gpu.dcgm.DCGM_TO_SLOGUARD` (value × scale, the same
series and labels as the NVML source, plus `target`); the clock-event bitmask (`DCGM_FI_DEV_CLOCKS_EVENT_REASONS`,
before DCGM 3.3 `DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`) becomes one `sloguard_gpu_clock_event_active{reason}` per
bit; health problems are decided by the same `sloguard.gpu.health` rules as NVML's. The GPU is keyed by the
`UUID` label (`uuid` in some versions); rows of MIG instances (`GPU_I_ID` set) are not mapped.
DCGM_FI_DEV_XID_ERRORS holds the last XID's number, not a count: a change to a new non-zero value counts as
one event of that XID. Fields a dcgm-exporter does not export are absent, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric

from sloguard.clock import Clock, SystemClock
from sloguard.config.spec import TargetSpec
from sloguard.families import Families
from sloguard.gpu import families as gf
from sloguard.gpu import health
from sloguard.gpu.dcgm import DCGM_TO_SLOGUARD
from sloguard.gpu.fields import decode_clock_events
from sloguard.model import Sample
from sloguard.sources.base import SourceError, SourceOutput
from sloguard.sources.parse import ParseError, parse_text
from sloguard.sources.scrape import ScrapeSource

REASON_FIELDS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"
# health.Reading field <- sloguard series (and fixed labels) it is read from
HEALTH_INPUTS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "busy": ("sloguard_gpu_utilization_ratio", ()), "sm_clock": ("sloguard_gpu_sm_clock_hertz", ()),
    "sm_clock_max": ("sloguard_gpu_sm_clock_max_hertz", ()),
    "ecc_uncorrected": ("sloguard_gpu_ecc_errors_total", (("type", "uncorrected"),)),
    "remap_pending": ("sloguard_gpu_row_remap_pending", ()), "remap_failure": ("sloguard_gpu_row_remap_failure", ()),
    "pcie_gen": ("sloguard_gpu_pcie_link_generation", ()),
    "pcie_gen_max": ("sloguard_gpu_pcie_link_max_generation", ()),
    "pcie_width": ("sloguard_gpu_pcie_link_width", ()), "pcie_width_max": ("sloguard_gpu_pcie_link_max_width", ()),
}


@dataclass
class GPUMemory:
    """What the source remembers per GPU between scrapes: health history and XIDs seen."""

    health: health.History = field(default_factory=health.History)
    last_xid: int = 0
    xids: dict[int, tuple[int, float]] = field(default_factory=dict)  # xid -> (events, last seen)


def _uuid(s: Sample) -> str:
    return s.labels.get("UUID") or s.labels.get("uuid") or ""


def _series(fams: Families, name: str, labels: dict[str, str], value: float) -> None:
    kind = "counter" if name.endswith("_total") else "gauge"
    fams.add(name.removesuffix("_total") if kind == "counter" else name, kind,
             "From dcgm-exporter (sloguard.gpu.dcgm crosswalk).", labels, value)


def map_samples(samples: Sequence[Sample], target: str, memory: dict[str, GPUMemory], now: float) -> list[Metric]:
    """Return the sloguard_gpu_* families of one dcgm-exporter page; `memory` carries health state across pages."""
    fams = Families()
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    masks: dict[str, int] = {}
    for s in samples:
        uuid = _uuid(s)
        if not uuid or s.labels.get("GPU_I_ID") or s.value != s.value:
            continue
        base = {"uuid": uuid, "target": target}
        if s.name in REASON_FIELDS:
            masks.setdefault(uuid, int(s.value))
        elif s.name == XID_FIELD:
            _xid(memory.setdefault(uuid, GPUMemory()), int(s.value), now)
        elif s.name in DCGM_TO_SLOGUARD:
            series, fixed, scale = DCGM_TO_SLOGUARD[s.name]
            _series(fams, series, base | fixed, s.value * scale)
            values.setdefault(uuid, {})[(series, tuple(sorted(fixed.items())))] = s.value * scale
        if s.name == "DCGM_FI_DEV_SM_CLOCK":
            info = {"uuid": uuid, "index": s.labels.get("gpu", ""), "name": s.labels.get("modelName", ""),
                    "driver_version": s.labels.get("DCGM_FI_DRIVER_VERSION", ""), "cuda_version": "",
                    "pci_bus_id": s.labels.get("pci_bus_id", ""), "target": target}
            fams.put(gf.DCGM_INFO, info, 1.0)
    for uuid, mask in sorted(masks.items()):
        for reason, active in decode_clock_events(mask):
            fams.put(gf.DCGM_CLOCK_EVENT, {"uuid": uuid, "target": target, "reason": reason}, active)
    for uuid in sorted(set(values) | set(masks)):
        _health(fams, uuid, target, values.get(uuid, {}), masks.get(uuid), memory.setdefault(uuid, GPUMemory()), now)
    return fams.all()


def _xid(mem: GPUMemory, xid: int, now: float) -> None:
    if xid and xid != mem.last_xid:
        n, _ = mem.xids.get(xid, (0, 0.0))
        mem.xids[xid] = (n + 1, now)
    mem.last_xid = xid


def _health(fams: Families, uuid: str, target: str, values: dict[tuple[str, tuple[tuple[str, str], ...]], float],
            mask: int | None, mem: GPUMemory, now: float) -> None:
    got = {k: values[(series, fixed)] for k, (series, fixed) in HEALTH_INPUTS.items() if (series, fixed) in values}
    r = health.Reading(clock_events=mask, **got)
    mem.health = health.step(r, mem.health, now)
    found = health.problems(r, mem.health, now, [(x, ts) for x, (_, ts) in mem.xids.items()], xids_watched=True)
    for reason in health.REASONS:
        if reason in found:
            fams.put(gf.DCGM_HEALTH, {"uuid": uuid, "target": target, "reason": reason}, float(found[reason]))
    for xid, (n, _) in sorted(mem.xids.items()):
        fams.put(gf.DCGM_XID_EVENTS, {"uuid": uuid, "target": target, "xid": str(xid)}, float(n))


class DcgmSource:
    """Source of kind "dcgm" for one target: scrape its dcgm-exporter, export the mapped GPU series."""

    kind = "dcgm"

    def __init__(self, target: TargetSpec, clock: Clock | None = None) -> None:
        self.target = target.name
        self.interval = target.scrape_interval
        self.timeout = target.scrape_timeout
        self.clock = clock or SystemClock()
        # The scrape machinery (limits, file://, content sniffing) of an engine target, pointed at dcgm_url.
        self._scrape = ScrapeSource(target.model_copy(update={"metrics_url": target.dcgm_url}), clock=self.clock)
        self._memory: dict[str, GPUMemory] = {}

    async def collect(self) -> SourceOutput:
        """Scrape once and map; a page without any DCGM GPU field is a reported failure."""
        text = await self._scrape.fetch_text()
        try:
            samples = parse_text(text)
        except ParseError as exc:
            raise SourceError("parse", str(exc)) from None
        fams = map_samples(samples, self.target, self._memory, self.clock.now())
        if not fams:
            raise SourceError("no_known_metrics", f"no DCGM_FI_* GPU fields in {len(samples)} samples")
        return SourceOutput(families=fams)

    async def close(self) -> None:
        """Close the HTTP session."""
        await self._scrape.close()
