"""The OCI image: built by scripts/build-image.sh (no registry pull) and run by podman as a kubelet would.

The build is cached by a hash of its inputs (a rerun costs seconds). Containers run with `--read-only`, no
capabilities, the image's own user, entrypoint and command. crun, podman's default runtime, cannot start
containers on this VM's hybrid cgroup mounts, so runc runs them; neither may raise RLIMIT_NOFILE/NPROC past the
sandbox's hard limits (podman's defaults are higher), so the limits are set to what the sandbox allows.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import time
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.helm import one, render
from support.procs import ROOT, free_port, http_get, metric_value, wait_until

from sloguard.demo import demo_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
MAX_IMAGE_BYTES = 300e6  # measured 236 MB (Debian base 112 MB, numpy 73 MB of the rest)
UID = 65532


@pytest.fixture(scope="module")
def image() -> str:
    for tool in ("podman", "runc"):
        assert shutil.which(tool), f"{tool} is missing: run scripts/setup.sh"
    start = time.monotonic()
    done = subprocess.run(["bash", "scripts/build-image.sh"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-6000:]
    print(f"scripts/build-image.sh: {time.monotonic() - start:.0f}s\n{done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def _podman(*args: str, timeout: float = 120, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    assert not ok or done.returncode == 0, f"podman {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


def _run_args(name: str, *extra: str) -> list[str]:
    """`podman run` locked down as the chart's pod: read-only root, no capabilities, scratch /tmp only."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return ["run", "--name", name, "--runtime", "runc", "--ulimit", f"nofile={nofile}:{nofile}",
            "--ulimit", "nproc=4096:4096", "--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp:rw,size=256m",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges", *extra]


@pytest.fixture
def containers() -> Iterator[list[str]]:
    """Names of the containers a test starts; all removed at its end."""
    names: list[str] = []
    yield names
    for name in reversed(names):  # a container sharing another's network namespace goes first
        _podman("rm", "-f", "-t", "0", name, ok=False)


def _start(containers: list[str], image: str, *args: str, opts: tuple[str, ...] = ()) -> str:
    name = f"sloguard-test-{uuid.uuid4().hex[:10]}"
    containers.append(name)
    _podman(*_run_args(name, "-d", *opts), image, *args)
    return name


def _logs(name: str) -> str:
    done = _podman("logs", name, ok=False)
    return done.stdout + done.stderr


def _inspect(name: str) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(_podman("inspect", name).stdout)[0]["State"]
    return state


def test_image_config_size_and_contents(image: str) -> None:
    info = json.loads(_podman("image", "inspect", image).stdout)[0]
    config = info["Config"]
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["/usr/bin/tini", "--", "/opt/sloguard/bin/sloguard"]
    assert config["Cmd"] == ["run", "-c", "/etc/sloguard/sloguard.yaml"]  # what the chart passes as args
    assert config["WorkingDir"] == "/var/lib/sloguard" and "9478/tcp" in config["ExposedPorts"]
    assert config["Labels"]["org.opencontainers.image.version"] == VERSION
    print(f"image size: {info['Size'] / 1e6:.0f} MB uncompressed")
    assert info["Size"] < MAX_IMAGE_BYTES
    mount = _podman("image", "mount", image).stdout.strip()
    try:
        root = Path(mount)
        site = root / "opt/sloguard/lib/python3.11/site-packages"
        assert (site / "sloguard").is_dir() and not list(site.glob("pip*")) and not list(site.glob("setuptools*"))
        assert (root / "var/lib/sloguard").stat().st_uid == UID  # the WORKDIR exists and is the daemon's
        assert not (root / "src").exists() and not (root / "usr/bin/apt-get").exists()
        assert not (root / "etc/resolv.conf").exists() or not (root / "etc/resolv.conf").read_text().strip()
        # every shared library the wheels' extensions link (manylinux leaves libstdc++ to the system) is there
        objects = [f"/{p.relative_to(root)}" for p in (root / "opt/sloguard").rglob("*.so*") if p.is_file()]
        assert len(objects) > 20
        ldd = subprocess.run(["chroot", str(root), "/bin/sh", "-c", 'for f; do ldd "$f"; done', "sh", *objects],
                             capture_output=True, text=True, timeout=120)
        assert ldd.returncode == 0 and "not found" not in ldd.stdout, ldd.stdout + ldd.stderr
    finally:
        _podman("image", "unmount", image, ok=False)


def test_version_and_check_run_the_image_own_files(image: str, tmp_path: Path) -> None:
    done = _podman(*_run_args(f"sloguard-test-{uuid.uuid4().hex[:10]}", "--rm"), image, "--version")
    assert done.stdout.strip() == f"sloguard {VERSION}"
    config = tmp_path / "conf"
    config.mkdir()
    shutil.copy(ROOT / "sloguard.example.yaml", config / "sloguard.yaml")
    mount = ("-v", f"{config}:/etc/sloguard:ro")
    done = _podman(*_run_args(f"sloguard-test-{uuid.uuid4().hex[:10]}", "--rm", *mount), image,
                   "check", "-c", "/etc/sloguard/sloguard.yaml")
    assert "/etc/sloguard/sloguard.yaml: ok (1 targets, 3 probes, 2 SLOs" in done.stdout, done.stdout + done.stderr
    (config / "sloguard.yaml").write_text("version: sloguard/v1\nslos: [{name: x, target: nowhere}]\n")
    bad = _podman(*_run_args(f"sloguard-test-{uuid.uuid4().hex[:10]}", "--rm", *mount), image,
                  "check", "-c", "/etc/sloguard/sloguard.yaml", ok=False)
    assert bad.returncode == 2 and "slos" in bad.stdout + bad.stderr, bad.stdout + bad.stderr


def test_the_charts_config_check_job_passes_in_the_image(image: str, tmp_path: Path) -> None:
    """The pre-upgrade hook as rendered (all values on, secrets referenced but not mounted) passes a good config."""
    docs = render(("ci/all-values.yaml",))
    job = next(d for d in docs if d["kind"] == "Job")
    hook_config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-check"))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    conf = tmp_path / "conf"  # readable by the image's user (pytest's tmp_path is 0700)
    conf.mkdir()
    (conf / "sloguard.yaml").write_text(hook_config["data"]["sloguard.yaml"])
    state = tmp_path / "state"  # the Job's emptyDir (fsGroup makes it the user's)
    state.mkdir()
    shutil.chown(state, UID, UID)
    mounts = ("-v", f"{conf}:/etc/sloguard:ro", "-v", f"{state}:/var/lib/sloguard")
    done = _podman(*_run_args(f"sloguard-test-{uuid.uuid4().hex[:10]}", "--rm", *mounts), image,
                   *container["args"], ok=False)
    assert done.returncode == 0 and ": ok (1 targets" in done.stdout, done.stdout + done.stderr


def test_demo_runs_in_the_image_and_is_reachable_through_a_published_port(
    image: str, containers: list[str]
) -> None:
    port = free_port()
    name = _start(containers, image, "demo", "--listen", "0.0.0.0:9478", "--duration", "10m",
                  opts=("-p", f"127.0.0.1:{port}:9478"))

    def live() -> bool:
        text = http_get(f"http://127.0.0.1:{port}/metrics")[1].decode()
        return ((metric_value(text, "sloguard_probe_requests_total", {"outcome": "success"}) or 0) > 0
                and metric_value(text, "sloguard_server_requests_running", {"target": "sim"}) is not None
                and metric_value(text, "sloguard_slo_goodput_ratio", {"window": "5m"}) is not None)

    try:
        wait_until(live, 60, "live simulator data from the demo in the container")
        wait_until(lambda: "sim-chat-latency: " in _podman("logs", name, ok=False).stdout, 20,
                   "the demo's status view")
    except AssertionError:
        raise AssertionError(_logs(name)) from None
    # the demo's own output (stdout; the daemon logs to stderr) starts with the simulator and its fault commands
    assert _podman("logs", name, ok=False).stdout.startswith("simulator: http://127.0.0.1:"), _logs(name)


def _chart_config(tmp_path: Path, sim_port: int) -> str:
    """The sloguard.yaml the chart renders (listen :9478, state /var/lib/sloguard) for the demo's targets."""
    config = yaml.safe_load(demo_config(sim_port, "unused", "unused"))
    del config["listen"], config["state_dir"]
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"config": config}))
    text: str = one(render((str(values),)), "ConfigMap")["data"]["sloguard.yaml"]
    return text


def _pid1(name: str) -> tuple[str, str]:
    """The container's PID 1 (tini) and its child, as the host's /proc shows them."""
    host_pid = int(_inspect(name)["Pid"])
    nspid = Path(f"/proc/{host_pid}/status").read_text().split("NSpid:")[1].split("\n")[0].split()
    assert nspid[-1] == "1", nspid  # PID 1 in the container's namespace
    child = Path(f"/proc/{host_pid}/task/{host_pid}/children").read_text().split()
    assert len(child) == 1, child
    cmdline = Path(f"/proc/{child[0]}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return Path(f"/proc/{host_pid}/comm").read_text().strip(), cmdline


def test_daemon_runs_the_charts_config_as_the_pod_does_and_stops_on_sigterm(
    image: str, tmp_path: Path, containers: list[str]
) -> None:
    """Simulator and daemon share one network namespace (a pod); the daemon gets the image's default command."""
    port = free_port()
    sim = _start(containers, image, "sim", "--listen", "127.0.0.1:8000", "--seed", "1",
                 opts=("-p", f"127.0.0.1:{port}:9478"))
    conf, state = tmp_path / "conf", tmp_path / "state"
    conf.mkdir()
    state.mkdir()
    shutil.chown(state, UID, UID)
    (conf / "sloguard.yaml").write_text(_chart_config(tmp_path, 8000))
    daemon = _start(containers, image, opts=("--network", f"container:{sim}", "-v", f"{conf}:/etc/sloguard:ro",
                                             "-v", f"{state}:/var/lib/sloguard"))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_get(f"{base}/-/ready")[0] == 200, 60, "/-/ready in the container")
        wait_until(lambda: (metric_value(http_get(f"{base}/metrics")[1].decode(), "sloguard_probe_requests_total",
                                         {"outcome": "success"}) or 0) > 0, 60, "a successful probe")
    except AssertionError:
        raise AssertionError(_logs(daemon) + _logs(sim)) from None
    assert http_get(f"{base}/-/healthy")[0] == 200
    assert _pid1(daemon) == ("tini", "/opt/sloguard/bin/python3 /opt/sloguard/bin/sloguard run -c "
                                     "/etc/sloguard/sloguard.yaml ")
    assert [p.name for p in state.iterdir()], "nothing written to the state volume"
    _podman("stop", "-t", "30", daemon, timeout=60)
    # 0: the daemon drained on SIGTERM; 137 would be podman's SIGKILL after 30 s
    assert _inspect(daemon)["ExitCode"] == 0, _logs(daemon)
    assert "sloguard stopped" in _logs(daemon)


def test_sigterm_during_start_is_not_lost(image: str, containers: list[str]) -> None:
    """As PID 1 without tini, a SIGTERM before the daemon's handler exists would be dropped (SIGKILL after 30 s)."""
    name = _start(containers, image, "sim", "--listen", "127.0.0.1:8000")
    _podman("stop", "-t", "30", name, timeout=60)
    # 143: killed by the forwarded SIGTERM before its handler existed; 0: it had one and drained
    assert _inspect(name)["ExitCode"] in (0, 143), _logs(name)
