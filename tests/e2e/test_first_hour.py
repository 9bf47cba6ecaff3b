"""First-hour friction: `--version`, and a probe model the server does not serve is named by `check --online` and
by the daemon's first run (against the real simulator process)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.procs import ROOT, Proc, free_port, sim_config, simulator, start_daemon, wait_until

from sloguard import __version__

pytestmark = pytest.mark.e2e


def _sloguard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sloguard", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, check=False)


def test_version_flag_and_subcommand_agree() -> None:
    for args in (["--version"], ["version"]):
        out = _sloguard(*args)
        assert out.returncode == 0 and out.stdout.strip() == f"sloguard {__version__}", out


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    with simulator(tmp_path_factory.mktemp("sim")) as proc:
        yield proc


def _config(sim: Proc, tmp: Path, model: str) -> Path:
    cfg = tmp / "c.yaml"
    text = sim_config(sim, free_port(), tmp / "state").replace("model: sim-llama-3-8b", f"model: {model}")
    # Only the /metrics and /v1/models checks are under test here (the records check has its own tests).
    cfg.write_text(text.replace("    scrape_interval: 1s\n", "    scrape_interval: 1s\n    server_records: none\n", 1))
    return cfg


def test_check_online_names_an_unserved_model(sim: Proc, tmp_path: Path) -> None:
    out = _sloguard("check", "-c", str(_config(sim, tmp_path, "llama-3-70b")), "--online")
    assert out.returncode == 1, out
    assert "target sim: model llama-3-70b not served (served: sim-llama-3-8b)" in out.stderr
    out = _sloguard("check", "-c", str(_config(sim, tmp_path, "sim-llama-3-8b")), "--online")
    assert out.returncode == 0, out
    assert "target sim: vllm engine, serves sim-llama-3-8b" in out.stdout


def test_check_online_takes_an_api_url_ending_in_v1(sim: Proc, tmp_path: Path) -> None:
    """Issue 46 found 6: `api_url: .../v1` probed fine but `check --online` asked /v1/v1/models (404)."""
    cfg = _config(sim, tmp_path, "sim-llama-3-8b")
    cfg.write_text(cfg.read_text().replace(f"api_url: {sim.url}\n", f"api_url: {sim.url}/v1/\n"))
    assert f"api_url: {sim.url}/v1/" in cfg.read_text()
    out = _sloguard("check", "-c", str(cfg), "--online")
    assert out.returncode == 0, out
    assert "target sim: vllm engine, serves sim-llama-3-8b" in out.stdout


def test_check_online_names_an_unreachable_target(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"""version: sloguard/v1
targets: [{{name: gone, metrics_url: "http://127.0.0.1:{port}/metrics", api_url: "http://127.0.0.1:{port}", model: m}}]
probes: [{{name: p, target: gone}}]
""")
    out = _sloguard("check", "-c", str(cfg), "--online")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "target gone: /metrics connect: " in out.stderr
    assert f"target gone: cannot read http://127.0.0.1:{port}/v1/models" in out.stderr


def test_daemon_first_run_warns_about_an_unserved_model(sim: Proc, tmp_path: Path) -> None:
    cfg = _config(sim, tmp_path, "llama-3-70b")
    daemon = start_daemon(tmp_path, cfg.read_text(), name="d.yaml")
    try:
        wait_until(lambda: "model llama-3-70b not served (served: sim-llama-3-8b)" in daemon.output(), 30,
                   "the start-up warning")
        assert daemon.output().count("not served") == 1  # the first run only, not every cycle
    finally:
        daemon.stop()
