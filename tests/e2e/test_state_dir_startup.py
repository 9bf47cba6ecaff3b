"""A misconfigured state_dir stops `sloguard run` with one line naming the path and exit 2, never a
traceback (issue 18 item 2); `sloguard check` reports the same offline as `state_dir: ...`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.procs import ROOT, free_port, start_daemon
from support.storage import without_dac_override

pytestmark = pytest.mark.e2e


def config(tmp: Path, state_dir: Path, name: str = "sloguard.yaml") -> Path:
    path = tmp / name
    path.write_text(f'version: sloguard/v1\nlisten: "127.0.0.1:{free_port()}"\nstate_dir: "{state_dir}"\n'
                    "evaluation_interval: 1s\n")
    return path


def sloguard(*args: str, preexec: Callable[[], None] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sloguard", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, preexec_fn=preexec)


def layout(tmp: Path, kind: str) -> Path:
    (tmp / "a-file").write_text("x")
    (tmp / "no-write").mkdir(mode=0o500)
    (tmp / "garbage").mkdir()
    (tmp / "garbage" / "sloguard.db").write_bytes(b"\x7fELF not a database" * 50)
    return {"file": tmp / "a-file", "under-file": tmp / "a-file" / "state", "not-creatable": tmp / "no-write" / "s",
            "not-writable": tmp / "no-write", "not-a-store": tmp / "garbage"}[kind]


# kind -> (the message after "state_dir: PATH: " from run, the same from check, whether file permissions matter)
CASES = {
    "file": ("not a directory (it is a file)", "not a directory (it is a file)", False),
    "under-file": ("cannot be created: a parent is a file", "cannot be created: ", False),
    "not-creatable": ("cannot be created: permission denied", "cannot be created: ", True),
    "not-writable": ("not writable: permission denied", "not writable by this user (permission denied)", True),
    "not-a-store": ("not a usable sloguard store", "not a usable sloguard store (not an SQLite file)", False),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_misconfigured_state_dir_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    state = layout(tmp_path, kind)
    on_run, on_check, permissions = CASES[kind]
    preexec = without_dac_override() if permissions else None
    cfg = config(tmp_path, state)
    run = sloguard("run", "-c", str(cfg), preexec=preexec)
    shown = state / "sloguard.db" if kind == "not-a-store" else state
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    assert run.stderr.strip().splitlines() == [run.stderr.strip()]  # one line
    assert run.stderr.startswith(f"sloguard: state_dir: {shown}: {on_run}"), run.stderr
    check = sloguard("check", "-c", str(cfg), preexec=preexec)
    assert check.returncode == 2 and "Traceback" not in check.stdout + check.stderr
    assert check.stderr.startswith(f"{cfg}: state_dir: {shown}: {on_check}"), check.stderr


def test_a_second_sloguard_on_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = start_daemon(tmp_path, config(tmp_path, state, "first.yaml").read_text(), name="first.yaml")
    try:
        cfg = config(tmp_path, state)
        second = sloguard("run", "-c", str(cfg))
        assert second.returncode == 2 and "Traceback" not in second.stdout + second.stderr
        assert second.stderr.strip() == (f"sloguard: state_dir: {state}: in use by another running sloguard "
                                         f"(pid {first.popen.pid}); give each instance its own state_dir")
        check = sloguard("check", "-c", str(cfg))
        assert check.returncode == 0, check.stderr
        assert check.stdout.splitlines()[-1].endswith(f"in use by a running sloguard (pid {first.popen.pid})")
    finally:
        assert first.stop() == 0
    assert sloguard("check", "-c", str(cfg)).stdout.splitlines()[-1].startswith(f"state_dir: {state}: writable, ")
