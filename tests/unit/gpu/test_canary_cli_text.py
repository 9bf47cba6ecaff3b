"""`sloguard canary` text: units on every figure, a CPU is not called a GPU, no silent system state path."""

from __future__ import annotations

import pytest

from sloguard.gpu import canary_cli
from sloguard.gpu.canary_cli import _device, _figure


@pytest.mark.parametrize(("name", "value", "text"), [
    ("matmul_flops", 989.5e12, "989.5 TFLOP/s"), ("copy_bandwidth_bytes_per_second", 3.35e12, "3350 GB/s"),
    ("decoder_tpot_seconds", 0.0004, "0.4 ms"), ("decoder_ttft_seconds", None, "-"),
])
def test_figures_carry_units(name: str, value: float | None, text: str) -> None:
    assert _figure(name, value) == text


@pytest.mark.parametrize(("figures", "text"), [
    ({"device": "cpu", "gpu_name": "AMD EPYC"}, "device=cpu (AMD EPYC)"),
    ({"device": "cuda:0", "gpu_name": "NVIDIA H100 80GB HBM3"}, "device=cuda:0 gpu=NVIDIA H100 80GB HBM3"),
])
def test_device_is_named_for_what_it_is(figures: dict[str, object], text: str) -> None:
    assert _device(figures) == text


def test_without_state_dir_nothing_is_stored_and_it_says_so(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SLOGUARD_STATE_DIR", raising=False)
    assert canary_cli.main(["--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    assert "no --state-dir: the baseline is neither read nor stored" in err
    assert out.startswith("device=cpu") and "gpu=" not in out.splitlines()[0]
    assert "TFLOP/s" in out and "GB/s" in out and " ms " in out


def test_bad_options_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert canary_cli.main(["--timeout", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sloguard canary: --timeout: invalid duration '5'") and err.count("\n") == 1
