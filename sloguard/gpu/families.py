"""Every `sloguard_gpu_*` and `sloguard_canary_*` family, declared from the GPU tables and for the inline ones here.

Table-driven series (fields.FIELDS, PCIE_FIELDS, MEMORY_FIELDS, FIELD_VALUES, gpm.GPM_METRICS, the dcgm crosswalk)
are declared by walking the same tables the sources read; the series the sources build one by one are declared
below and built from these declarations (Families.put). MIG devices repeat memory and GPM series under
`sloguard_gpu_mig_*`; the dcgm-exporter source adds `target` to the series it maps.
"""

from __future__ import annotations

from sloguard.families import FamilyDef, declare
from sloguard.gpu import fields as nf
from sloguard.gpu.dcgm import DCGM_TO_SLOGUARD
from sloguard.gpu.gpm import GPM_METRICS

GPU, MIG = "sloguard_gpu_", "sloguard_gpu_mig_"
INFO_LABELS = ("uuid", "index", "name", "driver_version", "cuda_version", "pci_bus_id")
MIG_LABELS = ("uuid", "mig_uuid")


def _keys(labels: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    return tuple(k for k, _ in labels)


for _f in (*nf.FIELDS, *nf.PCIE_FIELDS):
    declare(_f.metric, _f.kind, _f.help, ("uuid", *_keys(_f.labels)))
for _metric, _, _doc in nf.MEMORY_FIELDS:
    declare(_metric, "gauge", _doc, ("uuid",))
    declare(_metric.replace(GPU, MIG), "gauge", _doc, MIG_LABELS)
for _fv in nf.FIELD_VALUES:
    declare(_fv.metric, _fv.kind, _fv.help, ("uuid", *(("link",) if _fv.per_link else ()), *_keys(_fv.labels)))
for _m in GPM_METRICS:
    declare(_m.metric, "gauge", _m.help, ("uuid", *_keys(_m.labels)))
    declare(_m.metric.replace(GPU, MIG), "gauge", _m.help, (*MIG_LABELS, *_keys(_m.labels)))
for _series, _fixed, _scale in DCGM_TO_SLOGUARD.values():
    _counter = _series.endswith("_total")
    declare(_series.removesuffix("_total"), "counter" if _counter else "gauge",
            "From dcgm-exporter (sloguard.gpu.dcgm crosswalk).", ("uuid", "target", *_fixed))

DEVICES = declare("sloguard_gpu_devices", "gauge", "GPUs NVML reports; a drop means a GPU fell off the bus.")
INFO = declare(GPU + "info", "gauge", "GPU identity; always 1.", INFO_LABELS)
DCGM_INFO = declare(GPU + "info", "gauge", "GPU identity; always 1.", (*INFO_LABELS, "target"))
XID_EVENTS = declare(GPU + "xid_events", "counter", "XID critical-error events seen since start.", ("uuid", "xid"))
DCGM_XID_EVENTS = declare(GPU + "xid_events", "counter", "XID critical-error events seen since start.",
                          ("uuid", "target", "xid"))
XID_LAST = declare(GPU + "xid_last_seen_timestamp_seconds", "gauge", "Unix time of the last such XID.", ("uuid", "xid"))
GPM_SUPPORTED = declare(GPU + "gpm_supported", "gauge",
                        "1 if this GPU reports GPM activity (sm/tensor/dram/pipe series); 0: those are absent.",
                        ("uuid",))
PROCESS_MEMORY = declare(GPU + "process_memory_bytes", "gauge", "GPU memory used by a compute process.",
                         ("uuid", "pid", "process"))
MIG_INFO = declare(MIG + "info", "gauge", "MIG device identity; always 1.", (*MIG_LABELS, "gi_id", "ci_id", "profile"))
_HEALTH = "1 while this sick-GPU signal holds, 0 when checked and clear; absent when it cannot be checked."
HEALTH = declare(GPU + "health_problem", "gauge", _HEALTH, ("uuid", "reason"))
DCGM_HEALTH = declare(GPU + "health_problem", "gauge", _HEALTH, ("uuid", "target", "reason"))
CLOCK_EVENT = declare(GPU + "clock_event_active", "gauge", "1 while this reason holds clocks down.", ("uuid", "reason"))
DCGM_CLOCK_EVENT = declare(GPU + "clock_event_active", "gauge", "1 while this clock-event (throttle) reason holds.",
                           ("uuid", "target", "reason"))

_AGE = " From the last canary run (at most one per interval; see last_run_timestamp)."
_DEV = ("device", "gpu")


def _canary(name: str, doc: str, *extra: str) -> FamilyDef:
    return declare(f"sloguard_canary_{name}", "gauge", doc + _AGE, (*_DEV, *extra))


CANARY: dict[str, FamilyDef] = {fd.name.removeprefix("sloguard_canary_"): fd for fd in (
    _canary("info", "Canary device identity and dtype; always 1.", "name", "dtype", "spec"),
    _canary("matmul_flops", "Achieved GEMM FLOP/s (bf16 on CUDA, fp32 on CPU)."),
    _canary("copy_bandwidth_bytes_per_second", "Device-to-device copy, read+write bytes/s."),
    _canary("decoder_ttft_seconds", "Tiny decoder prefill + first token latency."),
    _canary("decoder_tpot_seconds", "Tiny decoder time per decode step."),
    _canary("decoder_bandwidth_utilization_ratio",
            "Decoder weight bytes read per step / step time / spec memory bandwidth."),
    _canary("fraction_of_spec", "Achieved / datasheet peak.", "test"),
    _canary("fraction_of_baseline", "Achieved / this GPU's baseline (>1 better).", "test"),
    _canary("degraded", "1 if a named reason holds (see degraded_reason)."),
    _canary("degraded_reason", "1 for each reason the last run was judged degraded.", "reason"),
    _canary("contended",
            "1 if the run shared the GPU with other work (throughput not judged, not baselined); absent if unknown."),
    _canary("contention_ratio", "Share of the run's samples with other work busy on the GPU."),
    _canary("wait_seconds", "Time the run waited for a quiet gap before it started."),
    _canary("baseline_runs", "Uncontended healthy runs the baseline is the median of."),
    _canary("duration_seconds", "Wall time of the canary run, waiting included."),
    _canary("last_run_timestamp_seconds", "Unix time the last canary run finished."),
)}
