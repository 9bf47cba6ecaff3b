"""Spec peaks of common datacentre GPUs (NVIDIA datasheets), looked up by the device name."""

from __future__ import annotations

import re
from dataclasses import dataclass

TERA, GIGA = 1e12, 1e9


@dataclass(frozen=True)
class GPUPeak:
    """Datasheet peaks: dense (non-sparse) bf16 tensor FLOP/s and memory bandwidth in bytes/s."""

    model: str
    bf16_flops: float
    memory_bandwidth: float


# (name pattern, peak); the first match wins, so variants come before their family's default.
# bf16 figures are the datasheets' dense numbers (their headline "with sparsity" figure halved).
PEAKS: tuple[tuple[str, GPUPeak], ...] = (
    (r"\bH100\b.*\bNVL\b", GPUPeak("H100 NVL", 835 * TERA, 3900 * GIGA)),
    (r"\bH100\b.*\bPCIe\b", GPUPeak("H100 PCIe", 756 * TERA, 2000 * GIGA)),
    (r"\bH100\b", GPUPeak("H100 SXM5", 989.5 * TERA, 3350 * GIGA)),
    (r"\bH200\b.*\bNVL\b", GPUPeak("H200 NVL", 835 * TERA, 4800 * GIGA)),
    (r"\bH200\b", GPUPeak("H200 SXM", 989.5 * TERA, 4800 * GIGA)),
    (r"\bA100\b.*(80GB.*PCIe|PCIE-80GB)", GPUPeak("A100 PCIe 80GB", 312 * TERA, 1935 * GIGA)),
    (r"\bA100\b.*PCIe", GPUPeak("A100 PCIe 40GB", 312 * TERA, 1555 * GIGA)),
    (r"\bA100\b.*80GB", GPUPeak("A100 SXM4 80GB", 312 * TERA, 2039 * GIGA)),
    (r"\bA100\b", GPUPeak("A100 SXM4 40GB", 312 * TERA, 1555 * GIGA)),
    (r"\bL40S\b", GPUPeak("L40S", 362.05 * TERA, 864 * GIGA)),
    (r"\bL40\b", GPUPeak("L40", 181.05 * TERA, 864 * GIGA)),
    (r"\bL4\b", GPUPeak("L4", 121 * TERA, 300 * GIGA)),
    (r"\bA10\b", GPUPeak("A10", 125 * TERA, 600 * GIGA)),
)
_COMPILED = tuple((re.compile(p, re.IGNORECASE), peak) for p, peak in PEAKS)


def lookup(name: str) -> GPUPeak | None:
    """Return the peak for a device name such as "NVIDIA H100 80GB HBM3", or None if unknown."""
    return next((peak for rx, peak in _COMPILED if rx.search(name.replace("_", " "))), None)
