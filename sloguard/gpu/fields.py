"""Tables that drive the NVML source: per-GPU fields, clock-event reasons, and NVML error classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["gauge", "counter"]


@dataclass(frozen=True)
class Field:
    """One per-GPU value: `getter(handle, *constant names)` × scale → one series keyed by uuid."""

    metric: str
    kind: Kind
    help: str
    getter: str
    args: tuple[str, ...] = ()
    scale: float = 1.0
    labels: tuple[tuple[str, str], ...] = ()
    attr: str = ""  # read this attribute of a struct result (one NVML call serves all its fields)
    item: int | None = None  # or this item of a tuple result
    key: str = ""  # the name of this reading in the health check's input (health.READING_KEYS)
    absent: tuple[int, ...] = ()  # values that mean "not available" for this field


def _violation(policy: str, label: str) -> Field:
    return Field("sloguard_gpu_violation_seconds", "counter",
                 "Time this policy held clocks below the requested clocks, since the driver was loaded.",
                 "nvmlDeviceGetViolationStatus", (f"NVML_PERF_POLICY_{policy}",), 1e-9, (("policy", label),),
                 attr="violationTime")


def _remap(i: int, metric: str, doc: str, kind: Kind = "gauge", labels: tuple[tuple[str, str], ...] = (),
           key: str = "") -> Field:
    return Field(metric, kind, doc, "nvmlDeviceGetRemappedRows", labels=labels, item=i, key=key)


# Base units: NVML reports mW, mJ, MHz and ns; we export W, J, Hz and s.
FIELDS: tuple[Field, ...] = (
    Field("sloguard_gpu_utilization_ratio", "gauge", "Fraction of the last sample period a kernel ran.",
          "nvmlDeviceGetUtilizationRates", scale=0.01, attr="gpu", key="busy"),
    Field("sloguard_gpu_memory_utilization_ratio", "gauge",
          "Fraction of the last sample period device memory was read or written.",
          "nvmlDeviceGetUtilizationRates", scale=0.01, attr="memory"),
    Field("sloguard_gpu_power_watts", "gauge", "Current board power draw.", "nvmlDeviceGetPowerUsage",
          scale=1e-3),
    Field("sloguard_gpu_power_limit_watts", "gauge", "Enforced power limit.",
          "nvmlDeviceGetEnforcedPowerLimit", scale=1e-3),
    Field("sloguard_gpu_energy_joules", "counter", "Energy consumed since the driver was loaded.",
          "nvmlDeviceGetTotalEnergyConsumption", scale=1e-3),
    Field("sloguard_gpu_temperature_celsius", "gauge", "GPU core temperature.", "nvmlDeviceGetTemperature",
          ("NVML_TEMPERATURE_GPU",)),
    Field("sloguard_gpu_sm_clock_hertz", "gauge", "Current SM clock.", "nvmlDeviceGetClockInfo",
          ("NVML_CLOCK_SM",), scale=1e6, key="sm_clock"),
    Field("sloguard_gpu_memory_clock_hertz", "gauge", "Current memory clock.", "nvmlDeviceGetClockInfo",
          ("NVML_CLOCK_MEM",), scale=1e6),
    Field("sloguard_gpu_sm_clock_max_hertz", "gauge", "Maximum SM clock of this GPU.", "nvmlDeviceGetMaxClockInfo",
          ("NVML_CLOCK_SM",), scale=1e6, key="sm_clock_max"),
    Field("sloguard_gpu_memory_clock_max_hertz", "gauge", "Maximum memory clock of this GPU.",
          "nvmlDeviceGetMaxClockInfo", ("NVML_CLOCK_MEM",), scale=1e6),
    Field("sloguard_gpu_performance_state", "gauge", "Performance state: 0 (P0, fastest) to 15 (slowest).",
          "nvmlDeviceGetPerformanceState", absent=(32,)),  # NVML_PSTATE_UNKNOWN
    *(Field("sloguard_gpu_ecc_errors", "counter", "Volatile ECC errors since the last driver load.",
            "nvmlDeviceGetTotalEccErrors", (f"NVML_MEMORY_ERROR_TYPE_{kind.upper()}", "NVML_VOLATILE_ECC"),
            labels=(("type", kind),), key=f"ecc_{kind}") for kind in ("corrected", "uncorrected")),
    _remap(0, "sloguard_gpu_remapped_rows", "Memory rows remapped to spares, by the error class that caused it.",
           "counter", (("cause", "correctable"),)),
    _remap(1, "sloguard_gpu_remapped_rows", "", "counter", (("cause", "uncorrectable"),)),
    _remap(2, "sloguard_gpu_row_remap_pending", "1 while a row remap waits for a GPU reset to take effect.",
           key="remap_pending"),
    _remap(3, "sloguard_gpu_row_remap_failure", "1 once a row could not be remapped (spare rows exhausted).",
           key="remap_failure"),
    Field("sloguard_gpu_pcie_link_generation", "gauge", "Current PCIe link generation (drops when idle).",
          "nvmlDeviceGetCurrPcieLinkGeneration", key="pcie_gen"),
    Field("sloguard_gpu_pcie_link_max_generation", "gauge", "Highest PCIe generation this GPU and slot support.",
          "nvmlDeviceGetMaxPcieLinkGeneration", key="pcie_gen_max"),
    Field("sloguard_gpu_pcie_link_width", "gauge", "Current PCIe link width (lanes).",
          "nvmlDeviceGetCurrPcieLinkWidth", key="pcie_width"),
    Field("sloguard_gpu_pcie_link_max_width", "gauge", "Widest PCIe link this GPU and slot support (lanes).",
          "nvmlDeviceGetMaxPcieLinkWidth", key="pcie_width_max"),
    Field("sloguard_gpu_pcie_replays", "counter", "PCIe replays (link-level retransmissions) since reset.",
          "nvmlDeviceGetPcieReplayCounter"),
    _violation("POWER", "power"),
    _violation("THERMAL", "thermal"),
    _violation("SYNC_BOOST", "sync_boost"),
    _violation("BOARD_LIMIT", "board_limit"),
    _violation("LOW_UTILIZATION", "low_utilization"),
    _violation("RELIABILITY", "reliability"),
    _violation("TOTAL_APP_CLOCKS", "app_clocks"),
    _violation("TOTAL_BASE_CLOCKS", "base_clocks"),
)

# Memory: the v2 struct (driver >= 510) keeps the driver's reserved memory out of `used`, as nvidia-smi and
# dcgm-exporter do; total = used + reserved + free. With only v1, `used` includes reserved and reserved is absent.
MEMORY_VERSION = "nvmlMemory_v2"
MEMORY_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("sloguard_gpu_memory_used_bytes", "used", "Device memory allocated by processes (nvidia-smi memory.used)."),
    ("sloguard_gpu_memory_reserved_bytes", "reserved", "Device memory reserved by the driver and firmware."),
    ("sloguard_gpu_memory_free_bytes", "free", "Device memory not allocated."),
    ("sloguard_gpu_memory_total_bytes", "total", "Device memory in total."),
)


@dataclass(frozen=True)
class FieldValue:
    """One value read through nvmlDeviceGetFieldValues (one call per GPU serves them all)."""

    metric: str
    kind: Kind
    help: str
    field: str  # NVML_FI_* constant name
    labels: tuple[tuple[str, str], ...] = ()
    per_link: bool = False  # read once per NVLink link, scope id = link, labelled link="N"


FIELD_VALUES: tuple[FieldValue, ...] = (
    FieldValue("sloguard_gpu_memory_temperature_celsius", "gauge", "HBM (device memory) temperature.",
               "NVML_FI_DEV_MEMORY_TEMP"),
    FieldValue("sloguard_gpu_nvlink_up", "gauge", "1 while this NVLink link is active.", "NVML_FI_DEV_NVLINK_GET_STATE",
               per_link=True),
    *(FieldValue("sloguard_gpu_nvlink_errors", "counter", "NVLink data-link errors since the driver was loaded.",
                 f"NVML_FI_DEV_NVLINK_ERROR_DL_{name.upper()}", (("type", name),), per_link=True)
      for name in ("replay", "recovery", "crc")),
)
NVLINK_COUNT = "NVML_FI_DEV_NVLINK_LINK_COUNT"

# NVML's PCIe counters are KB/s over a 20 ms sample; KB = 1024 bytes as in nvidia-smi.
PCIE_FIELDS: tuple[Field, ...] = (
    Field("sloguard_gpu_pcie_tx_bytes_per_second", "gauge", "PCIe transmit throughput (20 ms sample).",
          "nvmlDeviceGetPcieThroughput", ("NVML_PCIE_UTIL_TX_BYTES",), scale=1024.0),
    Field("sloguard_gpu_pcie_rx_bytes_per_second", "gauge", "PCIe receive throughput (20 ms sample).",
          "nvmlDeviceGetPcieThroughput", ("NVML_PCIE_UTIL_RX_BYTES",), scale=1024.0),
)

# The first of these the module has reads the reasons bitmask (the older name was deprecated in 12.x).
CLOCK_EVENT_GETTERS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")

# Bits of nvmlDeviceGetCurrentClocksEventReasons (formerly ...ThrottleReasons), as in nvml.h.
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake"),
    (0x100, "display_clocks_setting"),
)

# Errors that mean NVML itself is unusable: fail the run, shut NVML down, re-initialise next cycle.
LIFECYCLE_ERRORS: dict[str, str] = {
    "NVML_ERROR_GPU_IS_LOST": "gpu_lost",
    "NVML_ERROR_RESET_REQUIRED": "gpu_lost",
    "NVML_ERROR_UNINITIALIZED": "uninitialized",
    "NVML_ERROR_DRIVER_NOT_LOADED": "driver_not_loaded",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": "lib_mismatch",
    "NVML_ERROR_NOT_FOUND": "not_found",
    "NVML_ERROR_GPU_NOT_FOUND": "not_found",
}

# Errors that mean "this field is not available here": omit the series, never export a sentinel.
# Any other non-lifecycle error on a field also omits it, but is logged once as a warning.
ABSENT_ERRORS: tuple[str, ...] = (
    "NVML_ERROR_NOT_SUPPORTED",
    "NVML_ERROR_NO_PERMISSION",
    "NVML_ERROR_NO_DATA",
    "NVML_ERROR_FUNCTION_NOT_FOUND",
    "NVML_ERROR_NOT_READY",
)

# Of those, the ones that cannot change while NVML stays initialised: the call is not repeated.
PERMANENT_ERRORS: tuple[str, ...] = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND")

# No NVML library on the machine: the quiet "no data" case under `nvml: auto`.
MISSING_LIBRARY_ERROR = "NVML_ERROR_LIBRARY_NOT_FOUND"

# NVML's "value not available" sentinels (all-ones uint32 / uint64); never exported as data.
SENTINELS: frozenset[int] = frozenset({0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF})


def decode_clock_events(mask: int) -> list[tuple[str, float]]:
    """Return (reason, 0.0|1.0) for every known reason bit, in table order."""
    return [(name, 1.0 if mask & bit else 0.0) for bit, name in CLOCK_EVENT_REASONS]


# nvmlValue_t members by nvmlValueType_t (NVML_VALUE_TYPE_DOUBLE = 0 ... UNSIGNED_SHORT = 6).
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def field_value(v: Any) -> float | None:
    """Decode one nvmlFieldValue_t's value by its type; None for an unknown type or a sentinel."""
    t = int(v.valueType)
    if not 0 <= t < len(_VALUE_MEMBERS):
        return None
    value = getattr(v.value, _VALUE_MEMBERS[t])
    return None if isinstance(value, int) and value in SENTINELS else float(value)


def cuda_version_text(version: int) -> str:
    """Render NVML's integer CUDA driver version (12040) as "12.4"."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def text(value: bytes | str) -> str:
    """Return NVML's string result as str (older pynvml returns bytes)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def mig_profile(name: str) -> str:
    """Extract the MIG profile ("1g.10gb") from a MIG device name, or the name itself."""
    _, sep, tail = name.rpartition("MIG ")
    return tail.strip() if sep else name
