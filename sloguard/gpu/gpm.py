"""GPM activity (Hopper and later): SM active and occupancy, tensor, DRAM bandwidth and FP pipes, no DCGM.

GPM metrics are differences between two counter samples. Each collection takes ONE sample and computes the
metrics over the gap since the previous collection's sample (kept between collections), so the collection
path never sleeps; the first collection after start or re-initialisation therefore has no GPM values.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from sloguard.gpu.reader import NVMLReader

log = logging.getLogger("sloguard.gpm")


@dataclass(frozen=True)
class GPMMetric:
    """One GPM metric: its NVML id constant, the sloguard series it becomes, dcgm-exporter's name for it."""

    metric: str
    nvml: str  # NVML_GPM_METRIC_* constant name; values are percentages 0..100
    dcgm: str
    help: str
    labels: tuple[tuple[str, str], ...] = ()


GPM_METRICS: tuple[GPMMetric, ...] = (
    GPMMetric("sloguard_gpu_sm_active_ratio", "NVML_GPM_METRIC_SM_UTIL", "DCGM_FI_PROF_SM_ACTIVE",
              "Fraction of SMs busy over the interval since the previous collection (GPM)."),
    GPMMetric("sloguard_gpu_sm_occupancy_ratio", "NVML_GPM_METRIC_SM_OCCUPANCY", "DCGM_FI_PROF_SM_OCCUPANCY",
              "Resident warps over the theoretical maximum, since the previous collection (GPM)."),
    GPMMetric("sloguard_gpu_tensor_active_ratio", "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
              "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
              "Fraction of time SMs ran tensor-core work, since the previous collection (GPM)."),
    GPMMetric("sloguard_gpu_dram_active_ratio", "NVML_GPM_METRIC_DRAM_BW_UTIL", "DCGM_FI_PROF_DRAM_ACTIVE",
              "Device memory bandwidth used over its theoretical maximum, since the previous collection (GPM)."),
    *(GPMMetric("sloguard_gpu_pipe_active_ratio", f"NVML_GPM_METRIC_{p.upper()}_UTIL",
                f"DCGM_FI_PROF_PIPE_{p.upper()}_ACTIVE",
                "Fraction of time SMs ran non-tensor math on this pipe, since the previous collection (GPM).",
                (("pipe", p),)) for p in ("fp16", "fp32", "fp64")),
)

Take = Callable[[Any], None]  # fills a GPM sample for one device (GPU or MIG instance)


class GPMSampler:
    """Keep two GPM sample buffers per device key and turn consecutive samples into metric values."""

    def __init__(self, metrics: tuple[GPMMetric, ...] = GPM_METRICS) -> None:
        self.metrics = metrics
        self._bufs: dict[str, tuple[Any, Any, bool]] = {}  # key -> (previous, spare, previous is filled)

    @staticmethod
    def supported(rd: NVMLReader, handle: Any) -> bool:
        """Return whether this GPU supports GPM (False when the call or the module lacks it; noted once)."""
        answer = rd.get("nvmlGpmQueryDeviceSupport", handle)
        return answer is not None and bool(answer.isSupportedDevice)

    def read(self, mod: ModuleType, key: str, take: Take) -> dict[GPMMetric, float] | None:
        """Take one sample; return the metrics since the previous one (None on the first call for `key`)."""
        prev, spare, filled = self._bufs.get(key) or (mod.nvmlGpmSampleAlloc(), mod.nvmlGpmSampleAlloc(), False)
        self._bufs[key] = (prev, spare, filled)
        take(spare)
        self._bufs[key] = (spare, prev, True)  # the new sample is the next call's previous one
        return self._metrics(mod, prev, spare) if filled else None

    def _metrics(self, mod: ModuleType, first: Any, second: Any) -> dict[GPMMetric, float]:
        wanted = [(m, getattr(mod, m.nvml)) for m in self.metrics if hasattr(mod, m.nvml)]
        mg = mod.c_nvmlGpmMetricsGet_t()
        mg.version = mod.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(wanted)
        mg.sample1, mg.sample2 = first, second
        for i, (_, mid) in enumerate(wanted):
            mg.metrics[i].metricId = mid
        mod.nvmlGpmMetricsGet(mg)
        out: dict[GPMMetric, float] = {}
        for i, (m, _) in enumerate(wanted):
            r = mg.metrics[i]
            if int(r.nvmlReturn) == mod.NVML_SUCCESS and 0.0 <= float(r.value) <= 100.0:
                out[m] = float(r.value) / 100.0
        return out

    def drop(self, mod: ModuleType | None, key: str | None = None) -> None:
        """Free the buffers of one key (or all); best effort, NVML may already be shut down."""
        keys = [key] if key is not None else list(self._bufs)
        for k in keys:
            bufs = self._bufs.pop(k, None)
            if bufs is None or mod is None:
                continue
            for s in bufs[:2]:
                try:
                    mod.nvmlGpmSampleFree(s)
                except mod.NVMLError:
                    log.debug("gpm sample free failed", extra={"key": k})
