"""The torch worker on CPU: figures, a KV-cached decoder that matches full recompute, SIGTERM exit."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from sloguard.gpu import canary_worker as w  # noqa: E402
from sloguard.gpu.specs import lookup  # noqa: E402


@pytest.mark.parametrize(("name", "model"), [
    ("NVIDIA H100 80GB HBM3", "H100 SXM5"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA H200 NVL", "H200 NVL"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA L40", "L40"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA A10", "A10"),
    ("NVIDIA A10G", None),
    ("NVIDIA GH200 480GB", None),
    ("AMD EPYC", None),
])
def test_spec_lookup(name: str, model: str | None) -> None:
    peak = lookup(name)
    assert (peak.model if peak else None) == model


def test_cpu_run_reports_every_figure() -> None:
    out = w.run("cpu")
    assert (out["device"], out["dtype"], out["gpu_uuid"]) == ("cpu", "float32", "")
    for key in ("matmul_flops", "copy_bandwidth_bytes_per_second", "decoder_ttft_seconds", "decoder_tpot_seconds",
                "decoder_bandwidth_bytes_per_second", "busy_seconds"):
        assert out[key] > 0, key
    assert out["decoder_bandwidth_bytes_per_second"] == pytest.approx(out["decoder_weight_bytes"]
                                                                      / out["decoder_tpot_seconds"])


def test_kv_cached_decode_matches_full_recompute() -> None:
    s = w.SIZES["cpu"]
    dev = torch.device("cpu")
    prompt = torch.randint(0, s.vocab, (16,), generator=torch.Generator().manual_seed(7))
    with torch.inference_mode():
        cached = w.TinyDecoder(dev, torch.float32, s)
        tok = cached.step(prompt, 0)
        seq = prompt
        for i in range(4):
            seq = torch.cat([seq, tok])
            tok = cached.step(tok, 16 + i)
            full = w.TinyDecoder(dev, torch.float32, s).step(seq, 0)  # same seed, no cache reuse
            assert int(tok) == int(full)


def test_weight_bytes_counts_blocks_and_head() -> None:
    s = w.SIZES["cpu"]
    d = s.d_model
    expect = 4 * (s.layers * (3 * d * d + d * d + 4 * d * d + 4 * d * d) + d * s.vocab)
    assert w.TinyDecoder(torch.device("cpu"), torch.float32, s).weight_bytes() == expect


@pytest.mark.parametrize(("device", "expect"), [("cpu", "cpu"), ("cuda", "cuda:0"), ("cuda:1", "cuda:1")])
def test_resolve(device: str, expect: str) -> None:
    assert str(w.resolve(device)) == expect


@pytest.fixture
def restore_sigterm() -> Iterator[None]:
    old = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, old)


def test_sigterm_exits_143_with_json(restore_sigterm: None, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(device: str) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)
        return w.run(device)  # the handler raises before or during this

    monkeypatch.setattr(w, "run", interrupted)
    assert w.main(["--device", "cpu"]) == 143
    assert json.loads(capsys.readouterr().out) == {"error": "terminated"}
