"""Hostile storage for e2e tests: a small tmpfs that dd fills or that is remounted read-only, and a way
for root to run a process that file permissions apply to."""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2


def is_root() -> bool:
    return os.geteuid() == 0


@contextmanager
def tmpfs(path: Path, size: str = "8m") -> Iterator[Path]:
    """Mount a tmpfs of `size` at `path` for the block; always unmounted. Skips unless root (mount needs it)."""
    if not is_root():
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        done = subprocess.run(["umount", str(path)], capture_output=True)
        if done.returncode != 0:  # something still holds a file open: detach now, freed when it closes
            subprocess.run(["umount", "-l", str(path)], check=True)


def fill(mount: Path) -> Path:
    """Fill the filesystem at `mount` with dd until ENOSPC; return the filler file (delete it to free space)."""
    filler = mount / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
    assert os.statvfs(mount).f_bavail == 0, "dd left free space"
    return filler


def remount(mount: Path, mode: str) -> None:
    """Remount `mount` "ro" or "rw"."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mount)], check=True)


def without_dac_override() -> Callable[[], None] | None:
    """Return a preexec_fn after which file permissions apply to root too (None when not root: they do)."""
    if not is_root():
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:
        for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return drop
