"""Canary verdict: fractions of spec peak and of this GPU's baseline, the `degraded` rule, exported families.

Pure. `degraded` rests only on evidence that holds on a busy GPU: throughput below the floors (0.90× the
GPU's baseline, or GEMM / copy below 0.5× the datasheet peak) counts only for a run that had the GPU to
itself; sick-GPU signals (health.REASONS) count always. Every reason is named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client.metrics_core import Metric

from sloguard.families import Families
from sloguard.gpu.contention import Contention
from sloguard.gpu.families import CANARY
from sloguard.gpu.specs import GPUPeak

BASELINE_FLOOR = 0.90


@dataclass(frozen=True)
class Test:
    """One judged figure: its key in the worker's JSON, direction, and the spec peak it is held to."""

    name: str
    figure: str
    higher_is_better: bool
    spec_peak: str | None = None  # GPUPeak attribute
    spec_floor: float | None = None
    vs_baseline: bool = True


TESTS: tuple[Test, ...] = (
    Test("matmul", "matmul_flops", True, "bf16_flops", 0.5),
    Test("copy", "copy_bandwidth_bytes_per_second", True, "memory_bandwidth", 0.5),
    Test("decoder_bandwidth", "decoder_bandwidth_bytes_per_second", True, "memory_bandwidth", vs_baseline=False),
    Test("decoder_ttft", "decoder_ttft_seconds", False),
    Test("decoder_tpot", "decoder_tpot_seconds", False),
)
FIGURES = tuple(t.figure for t in TESTS if t.vs_baseline)


@dataclass
class Report:
    """One canary run, judged; `figures` is the worker's JSON as-is, `codes` name each reason."""

    figures: dict[str, Any]
    spec_model: str | None = None
    fraction_of_spec: dict[str, float] = field(default_factory=dict)
    fraction_of_baseline: dict[str, float] = field(default_factory=dict)
    degraded: bool = False
    reasons: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    baseline_stored: bool = False
    baseline_runs: int = 0
    contended: bool | None = None
    contention_share: float | None = None
    contention_reason: str = ""
    waited_seconds: float = 0.0
    duration_seconds: float = 0.0
    timestamp: float = 0.0


def judge(figures: dict[str, Any], peak: GPUPeak | None, baseline: dict[str, float] | None,
          contention: Contention, problems: dict[str, str] | None = None) -> Report:
    """Return fractions of spec and of baseline and the verdict; throughput is judged only when uncontended."""
    rep = Report(figures, spec_model=peak.model if peak else None, contended=contention.contended,
                 contention_share=contention.share, contention_reason=contention.reason,
                 waited_seconds=contention.waited)
    judged = contention.contended is False
    for t in TESTS:
        value = figures.get(t.figure)
        if not isinstance(value, int | float) or value <= 0:
            continue
        if peak is not None and t.spec_peak:
            frac = rep.fraction_of_spec[t.name] = value / float(getattr(peak, t.spec_peak))
            if judged and t.spec_floor is not None and frac < t.spec_floor:
                _add(rep, f"{t.name}_below_spec", f"{t.name} at {frac:.2f}x spec < {t.spec_floor}")
        base = (baseline or {}).get(t.figure) if t.vs_baseline else None
        if base:
            frac = rep.fraction_of_baseline[t.name] = value / base if t.higher_is_better else base / value
            if judged and frac < BASELINE_FLOOR:
                _add(rep, f"{t.name}_below_baseline", f"{t.name} at {frac:.2f}x baseline < {BASELINE_FLOOR}")
    for code, text in (problems or {}).items():
        _add(rep, code, text)
    rep.degraded = bool(rep.codes)
    return rep


def _add(rep: Report, code: str, text: str) -> None:
    rep.codes.append(code)
    rep.reasons.append(text)


def canary_families(rep: Report) -> list[Metric]:
    """Build the sloguard_canary_* families of one judged run, labelled {device, gpu=uuid}."""
    f, fams = rep.figures, Families()
    dev = {"device": str(f.get("device", "cpu")), "gpu": str(f.get("gpu_uuid", ""))}

    def gauge(name: str, value: Any, extra: dict[str, str] | None = None) -> None:
        if isinstance(value, int | float):
            fams.put(CANARY[name], dev | (extra or {}), float(value))

    gauge("info", 1.0, {"name": str(f.get("gpu_name", "")), "dtype": str(f.get("dtype", "")),
                        "spec": rep.spec_model or ""})
    gauge("matmul_flops", f.get("matmul_flops"))
    gauge("copy_bandwidth_bytes_per_second", f.get("copy_bandwidth_bytes_per_second"))
    gauge("decoder_ttft_seconds", f.get("decoder_ttft_seconds"))
    gauge("decoder_tpot_seconds", f.get("decoder_tpot_seconds"))
    gauge("decoder_bandwidth_utilization_ratio", rep.fraction_of_spec.get("decoder_bandwidth"))
    for test, frac in rep.fraction_of_spec.items():
        gauge("fraction_of_spec", frac, {"test": test})
    for test, frac in rep.fraction_of_baseline.items():
        gauge("fraction_of_baseline", frac, {"test": test})
    gauge("degraded", float(rep.degraded))
    for code in rep.codes:
        gauge("degraded_reason", 1.0, {"reason": code})
    gauge("contended", None if rep.contended is None else float(rep.contended))
    gauge("contention_ratio", rep.contention_share)
    gauge("wait_seconds", rep.waited_seconds)
    gauge("baseline_runs", float(rep.baseline_runs))
    gauge("duration_seconds", rep.duration_seconds)
    gauge("last_run_timestamp_seconds", rep.timestamp)
    return fams.all()
