"""Install paths as a user takes them: a release (wheel + sdist) built by `python -m build`, installed into a clean
virtualenv; scripts/install.sh staged into a DESTDIR and checked with the real systemd tools; its uninstall.

Offline: dependencies come from the wheelhouse scripts/setup.sh downloads (.cache/wheelhouse), as they would
from an index. The container image is built and run by tests/e2e/test_image.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from support.procs import PATIENCE, ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
WHEELHOUSE = ROOT / ".cache" / "wheelhouse"
PREFIX = "/opt/sloguard"


def _offline() -> dict[str, str]:
    assert (WHEELHOUSE / ".stamp").is_file(), f"{WHEELHOUSE} is missing: run scripts/setup.sh"
    return {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _run(*args: str | Path, cwd: Path = ROOT, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=_offline(),
                          timeout=300 * PATIENCE)
    if ok:
        assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--outdir", out, ROOT)  # sdist, then the wheel built from that sdist
    (wheel,) = out.glob("sloguard-*-py3-none-any.whl")
    (sdist,) = out.glob("sloguard-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_sdist_and_wheel_carry_the_license_and_the_package(release: dict[str, Path]) -> None:
    with tarfile.open(release["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", "sloguard/cli.py", "sloguard/py.typed"} <= names
    with zipfile.ZipFile(release["wheel"]) as whl:
        meta_name = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        meta = whl.read(meta_name).decode()
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in whl.namelist())
        entry = whl.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    assert "License-Expression: Apache-2.0" in meta
    assert "sloguard = sloguard.cli:entry" in entry


def test_wheel_installs_into_a_clean_venv_and_checks_the_example(release: dict[str, Path], tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", release["wheel"])
    version = _run(venv / "bin" / "sloguard", "--version", cwd=tmp_path)
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert version.stdout.strip() == f"sloguard {meta['version']}"
    check = _run(venv / "bin" / "sloguard", "check", "-c", ROOT / "sloguard.example.yaml", cwd=tmp_path)
    assert ": ok (" in check.stdout
    where = _run(venv / "bin" / "python", "-c", "import sloguard; print(sloguard.__file__)", cwd=tmp_path)
    assert where.stdout.startswith(str(venv)), "the installed copy, not the checkout, must be imported"


@pytest.fixture(scope="module")
def staged(release: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stage")
    _run("bash", ROOT / "scripts" / "install.sh", "--destdir", root, "--wheel", release["wheel"])
    return root


def test_staged_venv_runs_from_its_final_prefix(staged: Path) -> None:
    venv = staged / PREFIX.lstrip("/")
    assert (venv / "bin" / "sloguard").read_text().splitlines()[0] == f"#!{PREFIX}/bin/python"
    assert str(staged) not in (venv / "pyvenv.cfg").read_text()
    assert os.readlink(staged / "usr/local/bin/sloguard") == f"{PREFIX}/bin/sloguard"
    assert _run(venv / "bin" / "python", "-m", "sloguard", "--version").stdout.startswith("sloguard ")


def test_staged_config_skeleton_passes_check(staged: Path) -> None:
    venv = staged / PREFIX.lstrip("/")
    config = staged / "etc/sloguard/sloguard.yaml"
    assert config.read_text() == (ROOT / "systemd" / "sloguard.yaml").read_text()
    assert ": ok (" in _run(venv / "bin" / "python", "-m", "sloguard", "check", "-c", config).stdout


def test_staged_unit_verifies_and_runs_as_the_created_user(staged: Path, tmp_path: Path) -> None:
    unit = (staged / "etc/systemd/system/sloguard.service").read_text()
    assert re.search(rf"^ExecStart={PREFIX}/bin/sloguard run -c /etc/sloguard/sloguard.yaml$", unit, re.M)
    assert re.search(r"^User=sloguard$", unit, re.M)
    # verify checks that ExecStart exists on this host: point it at the staged copy, change nothing else.
    copy = tmp_path / "sloguard.service"
    copy.write_text(unit.replace(f"ExecStart={PREFIX}/", f"ExecStart={staged}{PREFIX}/"))
    done = _run("systemd-analyze", "verify", "--man=no", "--generators=no", copy, cwd=tmp_path, ok=False)
    assert done.returncode == 0 and done.stdout.strip() == "" and done.stderr.strip() == "", done.stderr
    users = _run("systemd-sysusers", f"--root={tmp_path / 'root'}", "--dry-run",
                 staged / "etc/sysusers.d/sloguard.conf")
    assert "Creating user 'sloguard'" in users.stdout + users.stderr


def test_uninstall_keeps_config_and_state(release: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "stage"
    script = ROOT / "scripts" / "install.sh"
    _run("bash", script, "--destdir", root, "--wheel", release["wheel"])
    state = root / "var/lib/sloguard/sloguard.db"
    state.parent.mkdir(parents=True)
    state.write_bytes(b"probe history")
    config = root / "etc/sloguard/sloguard.yaml"
    config.write_text(config.read_text() + "# edited\n")
    _run("bash", script, "--destdir", root, "--wheel", release["wheel"])  # reinstall keeps an edited config
    assert config.read_text().endswith("# edited\n")
    done = _run("bash", script, "--destdir", root, "--uninstall")
    assert not (root / PREFIX.lstrip("/")).exists() and not (root / "etc/systemd/system/sloguard.service").exists()
    assert not (root / "usr/local/bin/sloguard").is_symlink()
    assert state.read_bytes() == b"probe history" and config.read_text().endswith("# edited\n")
    assert "kept: /etc/sloguard (config), /var/lib/sloguard (state" in done.stderr


def test_install_script_refuses_the_host_without_root_and_bad_options(tmp_path: Path) -> None:
    script = ROOT / "scripts" / "install.sh"
    assert _run("bash", script, "--bogus", ok=False).returncode == 2
    assert "absolute path" in _run("bash", script, "--prefix", "rel", "--destdir", tmp_path, ok=False).stderr
    if os.geteuid() != 0:
        assert "needs root" in _run("bash", script, ok=False).stderr
