"""Tables that drive the NVML source: per-GPU fields, clock-event reasons, and NVML error classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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


# Base units: NVML reports mW, mJ and MHz; we export W, J and Hz.
FIELDS: tuple[Field, ...] = (
    Field("sloguard_gpu_utilization_ratio", "gauge", "Fraction of the last sample period a kernel ran.",
          "nvmlDeviceGetUtilizationRates", scale=0.01, attr="gpu"),
    Field("sloguard_gpu_memory_utilization_ratio", "gauge",
          "Fraction of the last sample period device memory was read or written.",
          "nvmlDeviceGetUtilizationRates", scale=0.01, attr="memory"),
    Field("sloguard_gpu_memory_used_bytes", "gauge", "Device memory in use.", "nvmlDeviceGetMemoryInfo",
          attr="used"),
    Field("sloguard_gpu_memory_total_bytes", "gauge", "Device memory in total.", "nvmlDeviceGetMemoryInfo",
          attr="total"),
    Field("sloguard_gpu_power_watts", "gauge", "Current board power draw.", "nvmlDeviceGetPowerUsage",
          scale=1e-3),
    Field("sloguard_gpu_power_limit_watts", "gauge", "Enforced power limit.",
          "nvmlDeviceGetEnforcedPowerLimit", scale=1e-3),
    Field("sloguard_gpu_energy_joules", "counter", "Energy consumed since the driver was loaded.",
          "nvmlDeviceGetTotalEnergyConsumption", scale=1e-3),
    Field("sloguard_gpu_temperature_celsius", "gauge", "GPU core temperature.", "nvmlDeviceGetTemperature",
          ("NVML_TEMPERATURE_GPU",)),
    Field("sloguard_gpu_sm_clock_hertz", "gauge", "Current SM clock.", "nvmlDeviceGetClockInfo",
          ("NVML_CLOCK_SM",), scale=1e6),
    Field("sloguard_gpu_memory_clock_hertz", "gauge", "Current memory clock.", "nvmlDeviceGetClockInfo",
          ("NVML_CLOCK_MEM",), scale=1e6),
    *(Field("sloguard_gpu_ecc_errors", "counter", "Volatile ECC errors since the last driver load.",
            "nvmlDeviceGetTotalEccErrors", (f"NVML_MEMORY_ERROR_TYPE_{kind.upper()}", "NVML_VOLATILE_ECC"),
            labels=(("type", kind),)) for kind in ("corrected", "uncorrected")),
)

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

# No NVML library on the machine: the quiet "no data" case under `nvml: auto`.
MISSING_LIBRARY_ERROR = "NVML_ERROR_LIBRARY_NOT_FOUND"

# NVML's "value not available" sentinels (all-ones uint32 / uint64); never exported as data.
SENTINELS: frozenset[int] = frozenset({0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF})


def decode_clock_events(mask: int) -> list[tuple[str, float]]:
    """Return (reason, 0.0|1.0) for every known reason bit, in table order."""
    return [(name, 1.0 if mask & bit else 0.0) for bit, name in CLOCK_EVENT_REASONS]


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
