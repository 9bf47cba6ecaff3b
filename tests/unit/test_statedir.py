"""state_dir at start-up: misconfiguration is one line naming the path; `check` says the same offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.storage import without_dac_override

from sloguard.statedir import DB_NAME, StateDirError, lock_holder, prepare, report
from sloguard.store import Store


def layout(tmp: Path, kind: str) -> Path:
    """Return a state_dir path of the given kind under tmp."""
    (tmp / "file").write_text("x")
    (tmp / "store").mkdir()
    (tmp / "store" / DB_NAME).write_bytes(b"not sqlite at all" * 10)
    return {"file": tmp / "file", "under-file": tmp / "file" / "state", "new": tmp / "a" / "b",
            "garbage-store": tmp / "store"}[kind]


@pytest.mark.parametrize(("kind", "message"), [
    ("file", "not a directory (it is a file)"),
    ("under-file", "cannot be created: a parent is a file, not a directory"),
])
def test_prepare_rejects_what_can_never_work(tmp_path: Path, kind: str, message: str) -> None:
    path = layout(tmp_path, kind)
    with pytest.raises(StateDirError) as err:
        prepare(str(path))
    assert str(err.value).startswith(f"state_dir: {path}: {message}") and "\n" not in str(err.value)


def test_prepare_creates_tests_a_write_and_locks(tmp_path: Path) -> None:
    state = prepare(str(layout(tmp_path, "new")))
    assert state.path.is_dir() and state.degraded == "" and state.lock_fd is not None
    assert list(state.path.iterdir()) == []  # the write test leaves nothing behind
    with pytest.raises(StateDirError, match=rf"in use by another running sloguard \(pid {os.getpid()}\)"):
        prepare(str(state.path))
    assert lock_holder(state.path) == os.getpid()
    state.release()
    prepare(str(state.path)).release()


@pytest.mark.parametrize(("kind", "usable", "fragment"), [
    ("file", False, "not a directory (it is a file)"),
    ("under-file", False, "is a file"),
    ("new", True, "does not exist; would be created in"),
    ("garbage-store", False, "not a usable sloguard store (not an SQLite file)"),
])
def test_report_says_what_it_can_offline(tmp_path: Path, kind: str, usable: bool, fragment: str) -> None:
    path = layout(tmp_path, kind)
    ok, line = report(str(path))
    assert (ok, line.startswith(f"state_dir: {path}")) == (usable, True) and fragment in line
    assert not (tmp_path / "a").exists()  # check creates nothing


def test_report_of_a_good_store_says_free_space(tmp_path: Path) -> None:
    Store(tmp_path / DB_NAME).close()  # a sloguard store (another program's database is refused: test_store_ownership)
    ok, line = report(str(tmp_path))
    assert ok and line.startswith(f"state_dir: {tmp_path}: writable, ") and line.endswith(" free")


SNIPPET = """
import sys
from sloguard.statedir import StateDirError, prepare, report
print(report(sys.argv[1]))
try:
    prepare(sys.argv[1])
except StateDirError as exc:
    print(exc)
"""


@pytest.mark.parametrize(("target", "expected"), [
    ("locked", "not writable: permission denied"),
    ("locked/sub", "cannot be created: permission denied"),
])
def test_permission_denied_is_named(tmp_path: Path, target: str, expected: str) -> None:
    (tmp_path / "locked").mkdir(mode=0o500)
    path = tmp_path / target
    out = subprocess.run([sys.executable, "-c", SNIPPET, str(path)], capture_output=True, text=True,
                         preexec_fn=without_dac_override(), timeout=60)
    assert out.returncode == 0, out.stderr
    checked, prepared = out.stdout.splitlines()
    assert checked.startswith("(False, 'state_dir: ") and "permission denied" in checked
    assert prepared == f"state_dir: {path}: {expected}"
