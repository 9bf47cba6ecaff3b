"""CanarySource with the fake NVML and a stand-in worker: the waiting policy, contention, baselines, export."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from support.exposition import names, promtool_check, samples
from support.nvml_fake import FakeGPU, FakeNVML

from sloguard.clock import FakeClock
from sloguard.config.spec import CanarySpec
from sloguard.gpu import canary_cli
from sloguard.gpu.canary import CanarySource, stop_gracefully
from sloguard.gpu.verdict import Report
from sloguard.sources.base import SourceError

GPU = {"device": "cuda:0", "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_uuid": "GPU-1", "dtype": "bfloat16",
       "torch_version": "2.11", "matmul_flops": 700e12, "copy_bandwidth_bytes_per_second": 2.8e12,
       "decoder_ttft_seconds": 0.004, "decoder_tpot_seconds": 0.0004, "decoder_weight_bytes": 534e6,
       "decoder_bandwidth_bytes_per_second": 534e6 / 0.0004, "busy_seconds": 1.5}
OTHER = 4242  # a serving engine's pid: holds GPU memory all along, runs kernels when busy
LAB = frozenset({("device", "cuda:0"), ("gpu", "GPU-1")})


@pytest.fixture(autouse=True)
def _all_gpus_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _fake_python(tmp_path: Path, figures: dict[str, Any] | None, extra: str = "", gated: bool = False) -> str:
    """A stand-in interpreter: logs each spawn, then prints canned figures (or runs `extra`).

    `gated`: it first waits for the file "go", which Scene creates after three polls during the run, so the
    run is sampled however slow the machine is.
    """
    script = tmp_path / f"fake-python-{len(list(tmp_path.glob('fake-python-*')))}"
    gate = f"while [ ! -e {tmp_path / 'go'} ]; do sleep 0.01; done\n" if gated else ""
    body = extra or f"{gate}echo '{json.dumps(figures)}'"
    script.write_text(f"#!/bin/sh\necho run >> {tmp_path / 'runs'}\n{body}\n")
    script.chmod(0o755)
    return str(script)


def _runs(tmp_path: Path) -> int:
    p = tmp_path / "runs"
    return len(p.read_text().splitlines()) if p.exists() else 0


class Scene:
    """A fake GPU whose activity a script changes at every poll, before and during the run."""

    def __init__(self, gpu: FakeGPU | None = None) -> None:
        self.gpu = gpu or FakeGPU("GPU-1", util=(0, 0))
        self.gpu.procs = self.gpu.procs or [(OTHER, 2**30)]
        self.nvml = FakeNVML([self.gpu])
        self.clock = FakeClock()
        self.polls = 0
        self.before: Callable[[int], float] = lambda i: 0.0  # other work's util before the run, by poll
        self.during: Callable[[int], float] = lambda i: 0.0  # other work's SM share during the run
        self.src: CanarySource | None = None
        self.gate: Path | None = None
        self.run_polls = 0

    def sleep(self) -> Callable[[float], Awaitable[None]]:
        async def sleep(seconds: float) -> None:
            self.clock.advance(seconds)
            self.polls += 1
            running = self.src is not None and self.src._proc is not None
            self.run_polls += running
            if running and self.run_polls >= 3 and self.gate is not None:
                self.gate.touch()
            share = self.during(self.polls) if running else 0.0
            self.gpu.util = (0 if running else round(100 * self.before(self.polls)), 0)
            self.gpu.proc_util = [(OTHER, round(100 * share))] if share else []
            await asyncio.sleep(0.005)  # let the worker process make progress
        return sleep

    def source(self, tmp_path: Path, python: str, **spec: Any) -> CanarySource:
        spec = {"max_wait": "10s", **spec}
        self.gate, self.run_polls = tmp_path / "go", 0
        self.gate.unlink(missing_ok=True)
        self.src = CanarySource(CanarySpec(enabled=True, **spec), tmp_path / "state", clock=self.clock,
                                python=python, kill_grace=0.5, nvml=self.nvml, sleep=self.sleep())  # type: ignore[arg-type]
        self.gpu.util = (round(100 * self.before(0)), 0)
        return self.src


def _run(src: CanarySource, calibrate: bool = False) -> Report:
    async def go() -> Report:
        try:
            return await src.run_once(calibrate)
        finally:
            await src.close()
    return asyncio.run(go())


@pytest.mark.parametrize(("before", "during", "contended", "min_wait", "max_wait"), [
    (lambda i: 0.0, lambda i: 0.0, False, 3.0, 3.0),  # quiet GPU: waits exactly the quiet gap
    (lambda i: 0.9 if i < 8 else 0.0, lambda i: 0.0, False, 6.5, 6.5),  # busy until 3.5 s, then 3 s quiet
    (lambda i: 0.0, lambda i: 0.6, True, 3.0, 3.0),  # busy during the run
    (lambda i: 0.9, lambda i: 0.9, True, 10.0, 10.0),  # never quiet within the bound: runs anyway
])
def test_waiting_policy(tmp_path: Path, before: Callable[[int], float], during: Callable[[int], float],
                        contended: bool, min_wait: float, max_wait: float) -> None:
    scene = Scene()
    scene.before, scene.during = before, during
    slow = GPU | {"matmul_flops": 320e12, "copy_bandwidth_bytes_per_second": 1.52e12}  # as measured when shared
    rep = _run(scene.source(tmp_path, _fake_python(tmp_path, slow if contended else GPU, gated=True)))
    assert rep.contended is contended, rep.contention_reason
    assert min_wait <= rep.waited_seconds <= max_wait
    assert rep.degraded is False  # a shared GPU's low throughput is never "degraded"
    assert rep.baseline_stored is not contended
    if contended and during(1) > 0:
        assert rep.contention_share is not None and rep.contention_share > 0.5
    fams = asyncio.run(_collect_families(rep))
    assert samples(fams)[("sloguard_canary_contended", LAB)] == float(contended)


async def _collect_families(rep: Report) -> Any:
    from sloguard.gpu.verdict import canary_families
    return canary_families(rep)


def test_baseline_only_from_uncontended_runs_and_robust_to_one_outlier(tmp_path: Path) -> None:
    scene = Scene()
    for _ in range(2):
        rep = _run(scene.source(tmp_path, _fake_python(tmp_path, GPU)))
        assert rep.baseline_stored and rep.fraction_of_baseline == {}  # fewer than 3 runs: nothing judged
    scene.during = lambda i: 0.8
    shared = _run(scene.source(tmp_path, _fake_python(tmp_path, GPU | {"matmul_flops": 300e12}, gated=True)))
    assert shared.contended and not shared.baseline_stored and shared.baseline_runs == 2
    scene.during = lambda i: 0.0
    outlier = _run(scene.source(tmp_path, _fake_python(tmp_path, GPU | {"matmul_flops": 950e12})))
    assert outlier.baseline_stored and outlier.baseline_runs == 3 and not outlier.degraded
    steady = _run(scene.source(tmp_path, _fake_python(tmp_path, GPU)))
    assert steady.fraction_of_baseline["matmul"] == pytest.approx(1.0)  # median of 700, 700, 950
    slower = _run(scene.source(tmp_path, _fake_python(tmp_path, GPU | {"matmul_flops": 600e12})))
    assert slower.degraded and slower.codes == ["matmul_below_baseline"] and not slower.baseline_stored
    recal = _run(scene.source(tmp_path, _fake_python(tmp_path, GPU | {"matmul_flops": 600e12})), calibrate=True)
    assert recal.baseline_stored and recal.baseline_runs == 1 and not recal.degraded


@pytest.mark.parametrize(("gpu", "code"), [
    (FakeGPU("GPU-1", util=(0, 0), remapped=(0, 1, 1, 0)), "row_remap_pending"),
    (FakeGPU("GPU-1", util=(0, 0), remapped=(0, 9, 0, 1)), "row_remap_failure"),
    (FakeGPU("GPU-1", util=(0, 0), pcie_link=(5, 5, 8, 16)), "pcie_width_below_max"),
    (FakeGPU("GPU-1", util=(0, 0), reasons=0x008), "hw_slowdown"),
])
def test_health_reasons_are_named_in_the_verdict(tmp_path: Path, gpu: FakeGPU, code: str) -> None:
    scene = Scene(gpu)
    scene.during = lambda i: 0.7  # even a contended run is degraded by a sick-GPU signal
    rep = _run(scene.source(tmp_path, _fake_python(tmp_path, GPU, gated=True)))
    assert rep.contended and rep.degraded and code in rep.codes
    fams = asyncio.run(_collect_families(rep))
    assert samples(fams)[("sloguard_canary_degraded_reason", LAB | {("reason", code)})] == 1.0


def test_clocks_below_max_while_the_canary_runs(tmp_path: Path) -> None:
    gpu = FakeGPU("GPU-1", util=(0, 0), clocks_mhz=(900, 2619), max_clocks_mhz=(1980, 2619))
    scene = Scene(gpu)
    sleep = scene.sleep()

    async def busy_while_running(seconds: float) -> None:
        await sleep(seconds)
        if scene.src is not None and scene.src._proc is not None:
            gpu.util = (99, 0)  # the canary itself keeps the GPU busy
    src = scene.source(tmp_path, _fake_python(tmp_path, GPU, gated=True))
    src.sleep = busy_while_running
    rep = _run(src)
    assert "clocks_below_max" in rep.codes and "900 MHz" in " ".join(rep.reasons)


def test_critical_xid_and_ecc_growth_between_runs(tmp_path: Path) -> None:
    scene = Scene()
    assert not _run(scene.source(tmp_path, _fake_python(tmp_path, GPU))).degraded
    src = scene.source(tmp_path, _fake_python(tmp_path, GPU))
    scene.gpu.ecc = (3, 2)
    scene.nvml.events.append((scene.gpu, 79))

    async def two_runs() -> tuple[Report, Report]:
        first = await src.run_once()  # this run sees the first uncorrectable count: no growth yet
        scene.gpu.ecc = (3, 4)
        second = await src.run_once()
        await src.close()
        return first, second
    first, second = asyncio.run(two_runs())
    assert "critical_xid" in first.codes and "uncorrectable_ecc_increase" not in first.codes
    assert {"critical_xid", "uncorrectable_ecc_increase"} <= set(second.codes)


@pytest.mark.parametrize("case", ["no nvml", "other gpu"])
def test_unmeasurable_contention_is_never_baselined_nor_judged(tmp_path: Path, case: str) -> None:
    scene = Scene()
    if case == "no nvml":
        scene.nvml.init_error = 9  # NVML_ERROR_DRIVER_NOT_LOADED
    figures = GPU | {"matmul_flops": 100e12} | ({"gpu_uuid": "GPU-9"} if case == "other gpu" else {})
    rep = _run(scene.source(tmp_path, _fake_python(tmp_path, figures)))
    assert rep.contended is None and not rep.baseline_stored and not rep.degraded
    assert rep.waited_seconds == (0.0 if case == "no nvml" else 3.0)


def test_families_and_promtool(tmp_path: Path) -> None:
    scene = Scene()
    scene.during = lambda i: 0.5
    src = scene.source(tmp_path, _fake_python(tmp_path, GPU, gated=True))
    fams = list(asyncio.run(src.collect()).families)
    got = samples(fams)
    assert got[("sloguard_canary_matmul_flops", LAB)] == 700e12
    assert got[("sloguard_canary_degraded", LAB)] == 0.0
    assert got[("sloguard_canary_contended", LAB)] == 1.0 and got[("sloguard_canary_contention_ratio", LAB)] > 0.5
    assert got[("sloguard_canary_wait_seconds", LAB)] == 3.0
    assert got[("sloguard_canary_fraction_of_spec", LAB | {("test", "copy")})] == pytest.approx(2.8 / 3.35)
    assert "sloguard_canary_decoder_bandwidth_utilization_ratio" in names(fams)
    assert promtool_check(fams) == ""


def _source(tmp_path: Path, python: str, clock: FakeClock | None = None, **spec: Any) -> CanarySource:
    scene = Scene()
    if clock is not None:
        scene.clock = clock
    return scene.source(tmp_path, python, **spec)


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
    scene = Scene()
    src = scene.source(tmp_path, _fake_python(tmp_path, GPU))
    src.baselines.path = tmp_path / "file" / "state" / "b.json"
    rep = _run(src)
    assert rep.baseline_stored is False and rep.degraded is False


def test_daemon_module_never_imports_torch() -> None:
    code = "import sloguard.gpu.canary, sys; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_real_cpu_canary_via_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert canary_cli.main(["--device", "cpu", "--json", "--state-dir", str(tmp_path)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert (rep["contended"], rep["waited_seconds"]) == (None, 0.0)  # a CPU cannot tell whether it is shared
    assert (rep["figures"]["device"], rep["figures"]["dtype"], rep["figures"]["gpu_uuid"]) == ("cpu", "float32", "")
    assert rep["figures"]["matmul_flops"] > 0 and rep["figures"]["decoder_tpot_seconds"] > 0
    assert rep["fraction_of_spec"] == {} and rep["baseline_stored"] is False and rep["degraded"] is False


@pytest.mark.parametrize("argv", [["--device", "gpu"], ["--device", "cuda:x"], ["--timeout", "5"], ["--max-wait=-1s"]])
def test_cli_rejects_bad_options(argv: list[str]) -> None:
    assert canary_cli.main(argv) == 2
