"""Canary verdict: fractions of spec peak and of this GPU's baseline, the `degraded` rule, exported families.

Pure apart from the baseline file. Degraded when any test is below 0.90× the calibrated baseline, or GEMM /
copy below 0.5× the datasheet peak.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.metrics_core import Metric

from sloguard.exporter.families import Families
from sloguard.gpu.specs import GPUPeak

log = logging.getLogger("sloguard.canary")
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


@dataclass
class Report:
    """One canary run, judged; `figures` is the worker's JSON as-is."""

    figures: dict[str, Any]
    spec_model: str | None = None
    fraction_of_spec: dict[str, float] = field(default_factory=dict)
    fraction_of_baseline: dict[str, float] = field(default_factory=dict)
    degraded: bool = False
    reasons: list[str] = field(default_factory=list)
    baseline_stored: bool = False
    duration_seconds: float = 0.0
    timestamp: float = 0.0


def judge(figures: dict[str, Any], peak: GPUPeak | None, baseline: dict[str, float] | None) -> Report:
    """Return fractions of spec (GPU with a known peak only) and of baseline, and the verdict."""
    rep = Report(figures, spec_model=peak.model if peak else None)
    for t in TESTS:
        value = figures.get(t.figure)
        if not isinstance(value, int | float) or value <= 0:
            continue
        if peak is not None and t.spec_peak:
            rep.fraction_of_spec[t.name] = value / float(getattr(peak, t.spec_peak))
            if t.spec_floor is not None and rep.fraction_of_spec[t.name] < t.spec_floor:
                rep.reasons.append(f"{t.name} at {rep.fraction_of_spec[t.name]:.2f}x spec < {t.spec_floor}")
        base = (baseline or {}).get(t.figure) if t.vs_baseline else None
        if base:
            rep.fraction_of_baseline[t.name] = value / base if t.higher_is_better else base / value
            if rep.fraction_of_baseline[t.name] < BASELINE_FLOOR:
                rep.reasons.append(f"{t.name} at {rep.fraction_of_baseline[t.name]:.2f}x baseline < {BASELINE_FLOOR}")
    rep.degraded = bool(rep.reasons)
    return rep


def baseline_key(figures: dict[str, Any]) -> str:
    """Key a baseline by device name and uuid, so a swapped GPU is never judged against another's."""
    return f"{figures.get('gpu_name', '')}|{figures.get('gpu_uuid', '')}"


def load_baselines(path: Path) -> dict[str, Any]:
    """Return the stored baselines ({} when missing or unreadable)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def store_baseline(path: Path, figures: dict[str, Any], now: float) -> bool:
    """Write this device's figures as its baseline atomically; return False if the state dir is not writable."""
    data = load_baselines(path)
    data[baseline_key(figures)] = {"figures": {t.figure: figures[t.figure] for t in TESTS if t.figure in figures},
                                   "calibrated_at": now, "torch_version": figures.get("torch_version")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("canary baseline not stored", extra={"path": str(path), "error": str(exc)})
        return False
    return True


def canary_families(rep: Report) -> list[Metric]:
    """Build the sloguard_canary_* families of one judged run, labelled {device, gpu=uuid}."""
    f, fams = rep.figures, Families()
    dev = {"device": str(f.get("device", "cpu")), "gpu": str(f.get("gpu_uuid", ""))}
    age = " From the last canary run (at most one per interval; see last_run_timestamp)."

    def gauge(name: str, doc: str, value: Any, extra: dict[str, str] | None = None) -> None:
        if isinstance(value, int | float):
            fams.add(name, "gauge", doc + age, dev | (extra or {}), float(value))

    gauge("sloguard_canary_info", "Canary device identity and dtype; always 1.", 1.0,
          {"name": str(f.get("gpu_name", "")), "dtype": str(f.get("dtype", "")), "spec": rep.spec_model or ""})
    gauge("sloguard_canary_matmul_flops", "Achieved GEMM FLOP/s (bf16 on CUDA, fp32 on CPU).", f.get("matmul_flops"))
    gauge("sloguard_canary_copy_bandwidth_bytes_per_second", "Device-to-device copy, read+write bytes/s.",
          f.get("copy_bandwidth_bytes_per_second"))
    gauge("sloguard_canary_decoder_ttft_seconds", "Tiny decoder prefill + first token latency.",
          f.get("decoder_ttft_seconds"))
    gauge("sloguard_canary_decoder_tpot_seconds", "Tiny decoder time per decode step.", f.get("decoder_tpot_seconds"))
    gauge("sloguard_canary_decoder_bandwidth_utilization_ratio",
          "Decoder weight bytes read per step / step time / spec memory bandwidth.",
          rep.fraction_of_spec.get("decoder_bandwidth"))
    for test, frac in rep.fraction_of_spec.items():
        gauge("sloguard_canary_fraction_of_spec", "Achieved / datasheet peak.", frac, {"test": test})
    for test, frac in rep.fraction_of_baseline.items():
        gauge("sloguard_canary_fraction_of_baseline", "Achieved / this GPU's calibrated baseline (>1 better).",
              frac, {"test": test})
    gauge("sloguard_canary_degraded", "1 if below 0.90x baseline or the spec floor.", float(rep.degraded))
    gauge("sloguard_canary_duration_seconds", "Wall time of the canary subprocess.", rep.duration_seconds)
    gauge("sloguard_canary_last_run_timestamp_seconds", "Unix time the last canary run finished.", rep.timestamp)
    return fams.all()
