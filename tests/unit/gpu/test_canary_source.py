"""CanarySource and the CLI: judging, baselines, duty cycle, worker failures, SIGTERM-first stopping."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.exposition import names, promtool_check, samples

from sloguard.clock import FakeClock
from sloguard.config.spec import CanarySpec
from sloguard.gpu import canary
from sloguard.gpu.canary import BASELINE_FILE, CanarySource, stop_gracefully
from sloguard.gpu.specs import lookup
from sloguard.gpu.verdict import judge
from sloguard.sources.base import SourceError

H100 = lookup("NVIDIA H100 80GB HBM3")
GPU = {"device": "cuda:0", "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_uuid": "GPU-1", "dtype": "bfloat16",
       "matmul_flops": 700e12, "copy_bandwidth_bytes_per_second": 2.8e12, "decoder_ttft_seconds": 0.004,
       "decoder_tpot_seconds": 0.0004, "decoder_weight_bytes": 534e6,
       "decoder_bandwidth_bytes_per_second": 534e6 / 0.0004, "busy_seconds": 1.5}
BASE = {k: GPU[k] for k in ("matmul_flops", "copy_bandwidth_bytes_per_second", "decoder_ttft_seconds",
                            "decoder_tpot_seconds")}


@pytest.mark.parametrize(("change", "baseline", "degraded", "reason"), [
    ({}, None, False, None),
    ({}, BASE, False, None),
    ({"matmul_flops": 400e12}, None, True, "matmul at 0.40x spec"),
    ({"copy_bandwidth_bytes_per_second": 1.5e12}, None, True, "copy at 0.45x spec"),
    ({"matmul_flops": 0.95 * 700e12}, BASE, False, None),
    ({"matmul_flops": 0.85 * 700e12}, BASE, True, "matmul at 0.85x baseline"),
    ({"decoder_tpot_seconds": 0.0005}, BASE, True, "decoder_tpot at 0.80x baseline"),
    ({"decoder_ttft_seconds": 0.003}, BASE, False, None),  # faster than baseline is fine
])
def test_judge(change: dict[str, float], baseline: dict[str, float] | None, degraded: bool, reason: str | None) -> None:
    rep = judge(GPU | change, H100, baseline)
    assert rep.degraded is degraded
    assert reason is None or any(r.startswith(reason) for r in rep.reasons)
    assert rep.fraction_of_spec["matmul"] == pytest.approx((GPU | change)["matmul_flops"] / 989.5e12)
    assert rep.fraction_of_spec["decoder_bandwidth"] == pytest.approx(534e6 / 0.0004 / 3350e9)
    assert ("decoder_bandwidth" in rep.fraction_of_baseline) is False


def test_judge_without_spec_peak_has_no_spec_fractions() -> None:
    rep = judge(GPU | {"matmul_flops": 1.0}, None, None)
    assert (rep.fraction_of_spec, rep.degraded) == ({}, False)


def _fake_python(tmp_path: Path, figures: dict[str, Any] | None, extra: str = "") -> str:
    """A stand-in interpreter: logs each spawn, then prints canned figures (or runs `extra`)."""
    script = tmp_path / "fake-python"
    body = extra or f"echo '{json.dumps(figures)}'"
    script.write_text(f"#!/bin/sh\necho run >> {tmp_path / 'runs'}\n{body}\n")
    script.chmod(0o755)
    return str(script)


def _runs(tmp_path: Path) -> int:
    p = tmp_path / "runs"
    return len(p.read_text().splitlines()) if p.exists() else 0


def _source(tmp_path: Path, python: str, clock: FakeClock | None = None, **spec: Any) -> CanarySource:
    return CanarySource(CanarySpec(enabled=True, **spec), tmp_path / "state", clock=clock or FakeClock(),
                        python=python, kill_grace=0.5)


def test_first_run_calibrates_then_judges_against_baseline(tmp_path: Path) -> None:
    src = _source(tmp_path, _fake_python(tmp_path, GPU))
    first = asyncio.run(src.run_once())
    assert (first.baseline_stored, first.fraction_of_baseline) == (True, {})
    stored = json.loads((tmp_path / "state" / BASELINE_FILE).read_text())
    assert stored["NVIDIA H100 80GB HBM3|GPU-1"]["figures"]["matmul_flops"] == 700e12
    slower = _source(tmp_path, _fake_python(tmp_path, GPU | {"matmul_flops": 500e12}))
    rep = asyncio.run(slower.run_once())
    assert rep.degraded and rep.fraction_of_baseline["matmul"] == pytest.approx(500 / 700)
    recal = asyncio.run(slower.run_once(calibrate=True))
    assert recal.baseline_stored and not recal.degraded


def test_families_and_promtool(tmp_path: Path) -> None:
    fams = list(asyncio.run(_source(tmp_path, _fake_python(tmp_path, GPU)).collect()).families)
    got = samples(fams)
    lab = frozenset({("device", "cuda:0"), ("gpu", "GPU-1")})
    assert got[("sloguard_canary_matmul_flops", lab)] == 700e12
    assert got[("sloguard_canary_degraded", lab)] == 0.0
    assert got[("sloguard_canary_fraction_of_spec", lab | {("test", "copy")})] == pytest.approx(2.8 / 3.35)
    assert "sloguard_canary_decoder_bandwidth_utilization_ratio" in names(fams)
    assert promtool_check(fams) == ""


def test_duty_cycle_caps_runs(tmp_path: Path) -> None:
    clock = FakeClock()
    src = _source(tmp_path, _fake_python(tmp_path, GPU | {"busy_seconds": 12.0}), clock, interval="10m")
    first = asyncio.run(src.collect())
    assert src.interval == pytest.approx(1200.0)  # 12 s busy at 1% duty cycle
    clock.advance(700)
    assert asyncio.run(src.collect()) is first and _runs(tmp_path) == 1
    clock.advance(501)
    asyncio.run(src.collect())
    assert _runs(tmp_path) == 2


@pytest.mark.parametrize(("extra", "reason", "text"), [
    ("echo boom >&2; exit 3", "worker_failed", "boom"),
    ("echo not-json", "worker_failed", "exit 0"),
    ("echo '{\"error\": \"RuntimeError: CUDA error\"}'; exit 2", "worker_failed", "CUDA error"),
])
def test_worker_failures_raise_source_error(tmp_path: Path, extra: str, reason: str, text: str) -> None:
    with pytest.raises(SourceError, match=text) as exc:
        asyncio.run(_source(tmp_path, _fake_python(tmp_path, None, extra)).collect())
    assert exc.value.reason == reason


def test_timeout_sigterms_the_worker_and_reaps_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    src = _source(tmp_path, _fake_python(tmp_path, None, f"echo $$ > {pid_file}; exec sleep 60"), timeout="300ms")

    async def scenario() -> None:
        with pytest.raises(SourceError) as exc:
            await src.collect()
        assert exc.value.reason == "timeout"
        await src.close()  # waits for the reaper

    asyncio.run(scenario())
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


@pytest.mark.parametrize(("ignore", "expect"), [(False, -15), (True, -9)])
def test_stop_gracefully_kills_only_after_sigterm_is_ignored(ignore: bool, expect: int) -> None:
    code = ("import signal, sys, time\n"
            + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore else "")
            + "print('ready', flush=True)\nsys.stdin.read()\n")

    async def scenario() -> int:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        await proc.stdout.readline()
        return await stop_gracefully(proc, grace=0.3)

    assert asyncio.run(scenario()) == expect


def test_unwritable_state_dir_still_reports(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    src = CanarySource(CanarySpec(enabled=True), tmp_path / "file" / "state", clock=FakeClock(),
                       python=_fake_python(tmp_path, GPU))
    rep = asyncio.run(src.run_once())
    assert rep.baseline_stored is False and rep.degraded is False


def test_daemon_module_never_imports_torch() -> None:
    code = "import sloguard.gpu.canary, sys; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_real_cpu_canary_via_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert canary.main(["--device", "cpu", "--json", "--state-dir", str(tmp_path)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert (rep["figures"]["device"], rep["figures"]["dtype"], rep["figures"]["gpu_uuid"]) == ("cpu", "float32", "")
    assert rep["figures"]["matmul_flops"] > 0 and rep["figures"]["decoder_tpot_seconds"] > 0
    assert rep["fraction_of_spec"] == {} and rep["baseline_stored"] is True


@pytest.mark.parametrize("argv", [["--device", "gpu"], ["--device", "cuda:x"], ["--timeout", "5"]])
def test_cli_rejects_bad_options(argv: list[str]) -> None:
    assert canary.main(argv) == 2
