"""A dcgm-exporter `/metrics` page for the simulated GPU, whose readings follow the simulator's state.

Names, types, help texts and label set are dcgm-exporter's (`DCGM_FI_*` gauges/counters labelled `gpu`,
`UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`; see
tests/fixtures/dcgm/dcgm-exporter-h100.txt). Utilisation is the engine's busy share since the previous
scrape; the SM clock is the max clock times the `gpu_clock_ratio` fault while busy (thermal slowdown bits
set, temperature up) and the idle clock with the `gpu_idle` bit while idle.
"""

from __future__ import annotations

from dataclasses import dataclass

UUID = "GPU-5a1e0c2b-7f3d-4c8e-9b6a-51d0c0ffee00"
LABELS = ('gpu="0",UUID="{uuid}",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",'
          'Hostname="sim",DCGM_FI_DRIVER_VERSION="570.124.06"')
MAX_SM_MHZ, IDLE_SM_MHZ, MEM_MHZ = 1980.0, 345.0, 2619.0
GPU_IDLE, SW_THERMAL, HW_THERMAL = 0x1, 0x20, 0x40
FB_TOTAL_MIB = 81559.0
# (field, type, help) in dcgm-exporter's default-counters order
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MAX_SM_CLOCK", "gauge", "Maximum supported SM clock (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge",
     "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe link generation."),
    ("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "gauge", "PCIe maximum link generation."),
    ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe link width."),
    ("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "gauge", "PCIe maximum link width."),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows has been triggered."),
)


@dataclass
class GPUState:
    """What the page remembers between scrapes: the engine's busy time at the previous one, and energy."""

    last_t: float | None = None
    last_busy: float = 0.0
    energy_mj: float = 0.0


def readings(state: GPUState, now: float, busy_s: float, clock_ratio: float, kv_used: float) -> dict[str, float]:
    """Return every field's value for one scrape at loop time `now` with the engine's cumulative busy time."""
    util = 0.0
    if state.last_t is not None and now > state.last_t:
        util = min(1.0, max(0.0, (busy_s - state.last_busy) / (now - state.last_t)))
    throttled = clock_ratio < 1.0
    busy = util > 0.0
    power = 90.0 + 560.0 * util * clock_ratio
    if state.last_t is not None:
        state.energy_mj += power * (now - state.last_t) * 1e3
    state.last_t, state.last_busy = now, busy_s
    reasons = (SW_THERMAL | HW_THERMAL if throttled else 0) if busy else GPU_IDLE
    used = 1200.0 + kv_used * 60000.0
    return {
        "DCGM_FI_DEV_SM_CLOCK": MAX_SM_MHZ * clock_ratio if busy else IDLE_SM_MHZ,
        "DCGM_FI_DEV_MEM_CLOCK": MEM_MHZ, "DCGM_FI_DEV_MAX_SM_CLOCK": MAX_SM_MHZ,
        "DCGM_FI_DEV_MEMORY_TEMP": 92.0 if throttled else 48.0, "DCGM_FI_DEV_GPU_TEMP": 88.0 if throttled else 46.0,
        "DCGM_FI_DEV_POWER_USAGE": power, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": state.energy_mj,
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0.0, "DCGM_FI_DEV_GPU_UTIL": round(util * 100),
        "DCGM_FI_DEV_MEM_COPY_UTIL": round(util * 60), "DCGM_FI_DEV_FB_FREE": FB_TOTAL_MIB - used,
        "DCGM_FI_DEV_FB_USED": used, "DCGM_FI_DEV_XID_ERRORS": 0.0, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": reasons,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0.0, "DCGM_FI_DEV_PCIE_LINK_GEN": 5.0, "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": 5.0,
        "DCGM_FI_DEV_PCIE_LINK_WIDTH": 16.0, "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": 16.0,
        "DCGM_FI_DEV_ROW_REMAP_PENDING": 0.0,
    }


def render(values: dict[str, float], uuid: str = UUID) -> bytes:
    """Return the page in dcgm-exporter's text format."""
    labels = LABELS.format(uuid=uuid)
    lines = []
    for name, kind, text in FIELDS:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {values[name]:g}"]
    return ("\n".join(lines) + "\n").encode()
