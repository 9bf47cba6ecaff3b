"""The canary's pure parts: verdict table, contention policy, baseline store, device and process mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sloguard.gpu import contention as ct
from sloguard.gpu.activity import others_share, pick_gpu
from sloguard.gpu.baseline import BaselineStore
from sloguard.gpu.reader import GPU
from sloguard.gpu.specs import lookup
from sloguard.gpu.verdict import FIGURES, judge

H100 = lookup("NVIDIA H100 80GB HBM3")
FIG: dict[str, Any] = {
    "device": "cuda:0", "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_uuid": "GPU-1", "dtype": "bfloat16",
    "torch_version": "2.11", "matmul_flops": 700e12, "copy_bandwidth_bytes_per_second": 2.8e12,
    "decoder_ttft_seconds": 0.004, "decoder_tpot_seconds": 0.0004, "decoder_weight_bytes": 534e6,
    "decoder_bandwidth_bytes_per_second": 534e6 / 0.0004, "busy_seconds": 1.5}
BASE = {k: FIG[k] for k in FIGURES}
ALONE = ct.Contention(False, 0.0, 0.0, "quiet")
SHARED = ct.Contention(True, 1.0, 60.0, "no quiet gap of 3s within 60s")
P = ct.Policy(threshold=0.05, quiet_gap=3.0, max_wait=60.0, poll=0.5)


@pytest.mark.parametrize(("change", "baseline", "cont", "codes"), [
    ({}, None, ALONE, []),
    ({}, BASE, ALONE, []),
    ({"matmul_flops": 400e12}, None, ALONE, ["matmul_below_spec"]),
    ({"copy_bandwidth_bytes_per_second": 1.5e12}, None, ALONE, ["copy_below_spec"]),
    ({"matmul_flops": 0.95 * 700e12}, BASE, ALONE, []),
    ({"matmul_flops": 0.85 * 700e12}, BASE, ALONE, ["matmul_below_baseline"]),
    ({"decoder_tpot_seconds": 0.0005}, BASE, ALONE, ["decoder_tpot_below_baseline"]),
    ({"decoder_ttft_seconds": 0.003}, BASE, ALONE, []),  # faster than baseline is fine
    # the H100 of the issue: 320 TFLOP/s and 1.52 TB/s beside another process's GEMMs -> not degraded
    ({"matmul_flops": 320e12, "copy_bandwidth_bytes_per_second": 1.52e12}, BASE, SHARED, []),
    ({"matmul_flops": 320e12}, BASE, ct.UNMEASURED, []),  # unknown contention: not judged either
])
def test_judge(change: dict[str, float], baseline: dict[str, float] | None, cont: ct.Contention,
               codes: list[str]) -> None:
    rep = judge(FIG | change, H100, baseline, cont)
    assert (rep.codes, rep.degraded) == (codes, bool(codes))
    assert len(rep.reasons) == len(rep.codes)
    assert rep.fraction_of_spec["matmul"] == pytest.approx((FIG | change)["matmul_flops"] / 989.5e12)
    assert rep.contended is cont.contended and rep.contention_share == cont.share


@pytest.mark.parametrize("reason", ["row_remap_pending", "row_remap_failure", "uncorrectable_ecc_increase",
                                    "critical_xid", "pcie_width_below_max", "pcie_gen_below_max", "hw_slowdown",
                                    "hw_thermal_slowdown", "hw_power_brake", "clocks_below_max", "gpu_lost"])
@pytest.mark.parametrize("cont", [ALONE, SHARED])
def test_health_reasons_degrade_even_a_contended_run(reason: str, cont: ct.Contention) -> None:
    rep = judge(FIG, H100, BASE, cont, {reason: f"{reason} text"})
    assert rep.degraded and rep.codes == [reason] and rep.reasons == [f"{reason} text"]


def test_judge_without_spec_peak_has_no_spec_fractions() -> None:
    rep = judge(FIG | {"matmul_flops": 1.0}, None, None, ALONE)
    assert (rep.fraction_of_spec, rep.degraded) == ({}, False)


def _samples(*others: float | None, step: float = 0.5) -> list[ct.Sample]:
    return [ct.Sample(i * step, o) for i, o in enumerate(others)]


@pytest.mark.parametrize(("others", "decision"), [
    ((0.0,) * 7, True),  # quiet for 3 s
    ((0.0,) * 6, False),  # 2.5 s so far
    ((0.9, 0.9) + (0.0,) * 5, False),  # quiet since the busy period ended at t=0.5: 2.5 s so far
    ((0.9, 0.9) + (0.0,) * 6, True),
    ((0.02,) * 7, True),  # below the threshold counts as quiet
    ((None,), True),  # blind: start at once, judged "not measurable"
])
def test_should_start(others: tuple[float | None, ...], decision: bool | None) -> None:
    assert ct.should_start(_samples(*others), 0.0, P) is decision


def test_should_start_gives_up_at_the_bound() -> None:
    busy = _samples(*([0.9] * 121))  # 60 s of samples
    assert ct.should_start(busy[:120], 0.0, P) is False
    assert ct.should_start(busy, 0.0, P) is None


@pytest.mark.parametrize(("gap", "run", "after", "contended", "share"), [
    (True, [0.0] * 10, None, False, 0.0),  # quiet GPU
    (True, [0.0] * 9 + [0.5], None, False, 0.1),  # one busy blip in ten: at the limit, still alone
    (True, [0.0] * 5 + [0.6] * 5, None, True, 0.5),  # busy during
    (False, [0.0] * 10, None, True, 0.0),  # never quiet within the bound
    (True, [None] * 4, 0.0, False, None),  # no per-process view: quiet right after
    (True, [None] * 4, 0.7, True, None),  # no per-process view: busy right after
    (True, [None] * 4, None, None, None),  # nothing measurable
])
def test_contention_judgement(gap: bool, run: list[float | None], after: float | None, contended: bool | None,
                              share: float | None) -> None:
    got = ct.judge(12.0, gap, _samples(*run), None if after is None else ct.Sample(99.0, after), P)
    assert (got.contended, got.share, got.waited) == (contended, share, 12.0)


def test_baseline_is_robust_median_and_resets_on_identity_change(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "b.json", keep=5)
    for v in (700e12, 705e12):
        store.add(FIG | {"matmul_flops": v}, "580.1", FIGURES, 0.0)
    assert store.get(FIG, "580.1", FIGURES) is None  # two runs: not yet a baseline
    for v in (100e12, 698e12, 702e12):  # one wild outlier among five
        store.add(FIG | {"matmul_flops": v}, "580.1", FIGURES, 0.0)
    base = store.get(FIG, "580.1", FIGURES)
    assert base is not None and base.runs == 5 and base.figures["matmul_flops"] == 700e12
    assert store.get(FIG, "590.2", FIGURES) is None  # new driver: history starts afresh
    assert store.get(FIG | {"torch_version": "2.12"}, "580.1", FIGURES) is None
    assert store.get(FIG | {"gpu_uuid": "GPU-2"}, "580.1", FIGURES) is None
    store.add(FIG, "580.1", FIGURES, 0.0, reset=True)
    assert len(store.runs(FIG, "580.1")) == 1


def test_baseline_keeps_the_last_n(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "b.json", keep=3)
    for v in (1.0, 2.0, 3.0, 4.0, 5.0):
        store.add(FIG | {"matmul_flops": v}, "d", FIGURES, 0.0)
    assert [r["matmul_flops"] for r in store.runs(FIG, "d")] == [3.0, 4.0, 5.0]


def _gpu(i: int, bus: str) -> GPU:
    return GPU(None, i, f"GPU-{i}abc", "H100", bus)


@pytest.mark.parametrize(("device", "visible", "uuid"), [
    ("cuda:0", None, "GPU-1abc"),  # NVML index 1 sits on the lower bus id
    ("cuda:1", None, "GPU-0abc"),
    ("cuda:0", "1", "GPU-0abc"),
    ("cuda:0", "GPU-0a", "GPU-0abc"),  # uuid prefixes as CUDA accepts them
    ("cuda:1", "0", None),
    ("cuda:0", "MIG-1234", None),  # a MIG instance: not one whole GPU
    ("cpu", None, None),
])
def test_pick_gpu(device: str, visible: str | None, uuid: str | None) -> None:
    gpus = [_gpu(0, "00000000:81:00.0"), _gpu(1, "00000000:01:00.0")]
    got = pick_gpu(gpus, device, visible)
    assert (got.uuid if got else None) == uuid


@pytest.mark.parametrize(("samples", "own", "seen", "share"), [
    ([(100, 90), (200, 30), (200, 50)], 100, {200}, 0.4),  # own pid left out; pid 200's mean
    ([(100, 90)], 100, set(), 0.0),
    ([(7, 90), (200, 30)], 100, {200}, 0.3),  # own pid hidden (container): the new pid 7 is the canary
    ([(200, 80), (300, 80)], 100, {200, 300}, 1.0),  # capped at 1
])
def test_others_share(samples: list[tuple[int, float]], own: int, seen: set[int], share: float) -> None:
    assert others_share(samples, own, seen) == pytest.approx(share)
