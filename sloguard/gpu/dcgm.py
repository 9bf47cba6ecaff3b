"""sloguard GPU series <-> dcgm-exporter field <-> `nvidia-smi --query-gpu` field, as one table.

Users cross-check sloguard against nvidia-smi with it (the table in docs/gpu.md is generated from it), and a
dcgm-exporter source can map DCGM fields onto the same series with DCGM_TO_SLOGUARD: sloguard value =
DCGM value × scale. Field names: NVIDIA dcgm_fields.h and dcgm-exporter's counters CSV; nvidia-smi
`--help-query-gpu` (remapped rows come from `--query-remapped-rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sloguard.gpu.gpm import GPM_METRICS

MIB = float(2**20)


@dataclass(frozen=True)
class Crosswalk:
    """One series (with fixed labels) and what dcgm-exporter and nvidia-smi call the same reading."""

    series: str
    labels: tuple[tuple[str, str], ...] = ()
    dcgm: str = ""
    scale: float | None = 1.0  # sloguard = DCGM × scale; None: not a plain rescale (see note)
    smi: str = ""
    note: str = ""


def _c(series: str, dcgm: str, scale: float | None, smi: str, note: str = "", **labels: str) -> Crosswalk:
    return Crosswalk(series, tuple(labels.items()), dcgm, scale, smi, note)


def _violation(policy: str, dcgm: str) -> Crosswalk:
    return _c("sloguard_gpu_violation_seconds_total", f"DCGM_FI_DEV_{dcgm}_VIOLATION", 1e-6, "",
              "DCGM in µs", policy=policy)


CROSSWALK: tuple[Crosswalk, ...] = (
    _c("sloguard_gpu_utilization_ratio", "DCGM_FI_DEV_GPU_UTIL", 0.01, "utilization.gpu"),
    _c("sloguard_gpu_memory_utilization_ratio", "DCGM_FI_DEV_MEM_COPY_UTIL", 0.01, "utilization.memory"),
    _c("sloguard_gpu_memory_used_bytes", "DCGM_FI_DEV_FB_USED", MIB, "memory.used", "NVML memory v2"),
    _c("sloguard_gpu_memory_reserved_bytes", "DCGM_FI_DEV_FB_RESERVED", MIB, "memory.reserved"),
    _c("sloguard_gpu_memory_free_bytes", "DCGM_FI_DEV_FB_FREE", MIB, "memory.free"),
    _c("sloguard_gpu_memory_total_bytes", "DCGM_FI_DEV_FB_TOTAL", MIB, "memory.total"),
    _c("sloguard_gpu_power_watts", "DCGM_FI_DEV_POWER_USAGE", 1.0, "power.draw"),
    _c("sloguard_gpu_power_limit_watts", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 1.0, "enforced.power.limit"),
    _c("sloguard_gpu_energy_joules_total", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3, ""),
    _c("sloguard_gpu_temperature_celsius", "DCGM_FI_DEV_GPU_TEMP", 1.0, "temperature.gpu"),
    _c("sloguard_gpu_memory_temperature_celsius", "DCGM_FI_DEV_MEMORY_TEMP", 1.0, "temperature.memory", "HBM"),
    _c("sloguard_gpu_sm_clock_hertz", "DCGM_FI_DEV_SM_CLOCK", 1e6, "clocks.sm"),
    _c("sloguard_gpu_memory_clock_hertz", "DCGM_FI_DEV_MEM_CLOCK", 1e6, "clocks.mem"),
    _c("sloguard_gpu_sm_clock_max_hertz", "DCGM_FI_DEV_MAX_SM_CLOCK", 1e6, "clocks.max.sm"),
    _c("sloguard_gpu_memory_clock_max_hertz", "DCGM_FI_DEV_MAX_MEM_CLOCK", 1e6, "clocks.max.memory"),
    _c("sloguard_gpu_performance_state", "DCGM_FI_DEV_PSTATE", 1.0, "pstate", "nvidia-smi prints P0 for 0"),
    _c("sloguard_gpu_clock_event_active", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", None, "clocks_event_reasons.<reason>",
       "one 0/1 series per bit of the mask", reason="<reason>"),
    _c("sloguard_gpu_ecc_errors_total", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 1.0, "ecc.errors.corrected.volatile.total",
       type="corrected"),
    _c("sloguard_gpu_ecc_errors_total", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1.0,
       "ecc.errors.uncorrected.volatile.total", type="uncorrected"),
    _c("sloguard_gpu_remapped_rows_total", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 1.0, "remapped_rows.correctable",
       cause="correctable"),
    _c("sloguard_gpu_remapped_rows_total", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 1.0,
       "remapped_rows.uncorrectable", cause="uncorrectable"),
    _c("sloguard_gpu_row_remap_pending", "DCGM_FI_DEV_ROW_REMAP_PENDING", 1.0, "remapped_rows.pending"),
    _c("sloguard_gpu_row_remap_failure", "DCGM_FI_DEV_ROW_REMAP_FAILURE", 1.0, "remapped_rows.failure"),
    _c("sloguard_gpu_pcie_link_generation", "DCGM_FI_DEV_PCIE_LINK_GEN", 1.0, "pcie.link.gen.current"),
    _c("sloguard_gpu_pcie_link_max_generation", "DCGM_FI_DEV_PCIE_MAX_LINK_GEN", 1.0, "pcie.link.gen.max"),
    _c("sloguard_gpu_pcie_link_width", "DCGM_FI_DEV_PCIE_LINK_WIDTH", 1.0, "pcie.link.width.current"),
    _c("sloguard_gpu_pcie_link_max_width", "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", 1.0, "pcie.link.width.max"),
    _c("sloguard_gpu_pcie_replays_total", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 1.0, "",
       "nvidia-smi -q: Replays Since Reset"),
    _violation("power", "POWER"),
    _violation("thermal", "THERMAL"),
    _violation("sync_boost", "SYNC_BOOST"),
    _violation("board_limit", "BOARD_LIMIT"),
    _violation("low_utilization", "LOW_UTIL"),
    _violation("reliability", "RELIABILITY"),
    _violation("app_clocks", "TOTAL_APP_CLOCKS"),
    _violation("base_clocks", "TOTAL_BASE_CLOCKS"),
    *(_c("sloguard_gpu_nvlink_errors_total", f"DCGM_FI_DEV_NVLINK_ERROR_DL_{t.upper()}", None, "",
         "per link here, per GPU in DCGM: sum by (uuid)", type=t) for t in ("replay", "recovery", "crc")),
    _c("sloguard_gpu_nvlink_up", "", None, "", "nvidia-smi nvlink -s", link="<n>"),
    _c("sloguard_gpu_xid_events_total", "DCGM_FI_DEV_XID_ERRORS", None, "", "DCGM: the last XID's number", xid="<xid>"),
    _c("sloguard_gpu_gpm_supported", "DCGM_FI_DEV_GPM_SUPPORT", 1.0, ""),
    *(Crosswalk(m.metric, m.labels, m.dcgm, 1.0, "", "GPM (Hopper+); DCGM needs its profiling module")
      for m in GPM_METRICS),
)

# A dcgm-exporter source maps each DCGM field onto sloguard's series: field -> (series, labels, scale).
DCGM_TO_SLOGUARD: dict[str, tuple[str, dict[str, str], float]] = {
    c.dcgm: (c.series, dict(c.labels), c.scale) for c in CROSSWALK if c.dcgm and c.scale is not None}


def markdown() -> str:
    """Return the crosswalk as the Markdown table of docs/gpu.md."""
    rows = ["| sloguard series | dcgm-exporter field | `nvidia-smi --query-gpu=` | note |", "| --- | --- | --- | --- |"]
    for c in CROSSWALK:
        labels = "{" + ",".join(f'{k}="{v}"' for k, v in c.labels) + "}" if c.labels else ""
        rows.append(f"| `{c.series}{labels}` | {f'`{c.dcgm}`' if c.dcgm else '—'} | "
                    f"{f'`{c.smi}`' if c.smi else '—'} | {c.note} |")
    return "\n".join(rows) + "\n"
