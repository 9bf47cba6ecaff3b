"""Built-in alerts on sick-GPU signals (sloguard_gpu_health_problem), each with its runbook.

Data only: sloguard.alerts.rules turns these into rules for the live engine and the rule generator, like
its own built-in operational rules. The expressions stay in the threshold subset (`metric{...} op number`)
so the daemon and Prometheus evaluate the same text.
"""

from __future__ import annotations

from dataclasses import dataclass

PROBLEM = "sloguard_gpu_health_problem"


@dataclass(frozen=True)
class GPUAlert:
    """One built-in GPU alert; `runbook` becomes the `description` annotation."""

    name: str
    expr: str
    for_: float
    severity: str
    summary: str
    runbook: str


def _on(*reasons: str) -> str:
    match = f'reason="{reasons[0]}"' if len(reasons) == 1 else f'reason=~"{"|".join(reasons)}"'
    return f"{PROBLEM}{{{match}}} == 1"


GPU_ALERTS: tuple[GPUAlert, ...] = (
    GPUAlert("SloguardGPULost", _on("gpu_lost"), 0.0, "critical",
             "GPU {{ $labels.uuid }} is gone from NVML (fell off the bus or stopped answering)",
             "Check `nvidia-smi` and `dmesg | grep -i xid` (XID 79: fallen off the bus). Drain the node, reset "
             "the GPU (`nvidia-smi -r -i <index>`) or reboot; if it recurs, reseat the board or RMA it."),
    GPUAlert("SloguardGPURowRemapPending", _on("row_remap_pending"), 0.0, "warning",
             "GPU {{ $labels.uuid }} has a memory row remap waiting for a reset",
             "An uncorrectable error was repaired by remapping a row (XID 63), but the repair takes effect only "
             "after a GPU reset. Drain the GPU, reset it or reboot the node, then check that "
             "`nvidia-smi --query-remapped-rows=gpu_uuid,remapped_rows.pending --format=csv` reads 0."),
    GPUAlert("SloguardGPURowRemapFailure", _on("row_remap_failure"), 0.0, "critical",
             "GPU {{ $labels.uuid }} could not remap a failing memory row",
             "A memory bank ran out of spare rows (XID 64): the GPU's memory can no longer be repaired and "
             "further errors may corrupt data. Drain the GPU, take it out of service and open an RMA."),
    GPUAlert("SloguardGPUUncorrectableECC", _on("uncorrectable_ecc_increase"), 0.0, "critical",
             "GPU {{ $labels.uuid }} reported new uncorrectable ECC errors in the last hour",
             "Uncorrectable (double-bit) ECC errors were counted: processes that touched the memory were killed "
             "(XID 48/94/95) and results may be corrupt. Check `nvidia-smi -q -d ECC,ROW_REMAPPER`; a row remap "
             "is usually pending: drain and reset. Errors that keep growing mean RMA."),
    GPUAlert("SloguardGPUCriticalXid", _on("critical_xid"), 0.0, "critical",
             "GPU {{ $labels.uuid }} reported a hardware XID in the last hour",
             "An XID that points at the GPU, its memory, NVLink or the bus (48, 61-64, 74, 79, 92, 94, 95, 119, "
             "120, 140) was seen; `sloguard_gpu_xid_events_total` says which. Look the XID up in NVIDIA's XID "
             "catalog; usually: drain, reset the GPU or reboot; RMA if it recurs."),
    GPUAlert("SloguardGPUPCIeLinkDegraded", _on("pcie_width_below_max", "pcie_gen_below_max"), 600.0, "warning",
             "GPU {{ $labels.uuid }} PCIe link runs below its maximum ({{ $labels.reason }})",
             "The link trained down (fewer lanes, or a lower generation while busy): host-GPU transfers such as "
             "model loads and KV-cache offload slow down. Compare `nvidia-smi --query-gpu=pcie.link.gen.current,"
             "pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv`; reseat the GPU or "
             "riser, check BIOS PCIe settings, reboot; replace the riser or RMA if it persists."),
    GPUAlert("SloguardGPUHardwareSlowdown", _on("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake"), 300.0,
             "warning", "GPU {{ $labels.uuid }} clocks are cut by hardware ({{ $labels.reason }})",
             "Hardware slowdown halves the clocks or more: over-temperature, an external power brake from the "
             "power supply, or power-draw protection. Check `nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER`, "
             "inlet temperature, fans and airflow, and the node's power supply."),
)
