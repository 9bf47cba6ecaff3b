"""The state directory at start-up: misconfiguration is a one-line error; a full or read-only disk is not.

`prepare` (for `sloguard run`) creates the directory, tests a real write and takes the instance lock;
`report` (for `sloguard check`) says the same offline, without creating or writing anything.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from sloguard.store import ForeignDatabase, foreign, is_storage_error

log = logging.getLogger("sloguard.store")
# A full or read-only disk, or quota: sloguard starts degraded (in memory) and attaches the store later.
DEGRADED_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT})
DB_NAME = "sloguard.db"  # the store's file in state_dir
_SQLITE_MAGIC = b"SQLite format 3\0"
_WRITE_TEST = ".sloguard-write-test"


class StateDirError(Exception):
    """state_dir cannot be used as configured; str() is the one-line message naming the path."""


@dataclass(frozen=True, slots=True)
class StateDir:
    """A usable state directory: `degraded` is why it cannot be written now ("" when it can)."""

    path: Path
    degraded: str
    lock_fd: int | None

    def release(self) -> None:
        """Drop the instance lock (closing the descriptor releases it)."""
        if self.lock_fd is not None:
            os.close(self.lock_fd)


def _error(path: Path, what: str) -> StateDirError:
    return StateDirError(f"state_dir: {path}: {what}")


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _create(path: Path) -> str:
    """Create `path` (and parents); return a degraded reason or ""; raise StateDirError on misconfiguration."""
    if path.exists() and not path.is_dir():
        raise _error(path, "not a directory (it is a file); point state_dir at a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise _error(path, "not a directory (it is a file); point state_dir at a directory") from None
    except NotADirectoryError:
        raise _error(path, "cannot be created: a parent is a file, not a directory") from None
    except OSError as exc:
        if exc.errno in DEGRADED_ERRNOS:
            return _describe(exc)
        raise _error(path, f"cannot be created: {_describe(exc).lower()}") from None
    return ""


def _write_test(path: Path) -> str:
    """Create, write one page to and delete a file in `path`; return a degraded reason or ""."""
    probe = path / f"{_WRITE_TEST}.{os.getpid()}"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
            probe.unlink(missing_ok=True)
    except OSError as exc:
        if exc.errno in DEGRADED_ERRNOS:
            return _describe(exc)
        raise _error(path, f"not writable: {_describe(exc).lower()}") from None
    return ""


def lock_holder(path: Path) -> int | None:
    """Return the pid holding a flock on directory `path`, from /proc/locks (Linux), or None."""
    try:
        st = path.stat()
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    suffix = f":{st.st_ino}"
    for line in lines:
        parts = line.split()
        if len(parts) > 5 and parts[1] == "FLOCK" and parts[5].endswith(suffix):
            major, minor, _ = parts[5].split(":")
            if (int(major, 16), int(minor, 16)) == (os.major(st.st_dev), os.minor(st.st_dev)):
                return int(parts[4])
    return None


def lock(path: Path) -> int:
    """Take the instance lock (flock on the directory: works on a read-only filesystem, released on death).

    Where the filesystem has no flock (some network filesystems), warn and go on unlocked.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise _error(path, f"cannot be opened: {_describe(exc).lower()}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        pid = lock_holder(path)
        holder = f" (pid {pid})" if pid else ""
        raise _error(path, f"in use by another running sloguard{holder}; give each instance its own "
                           "state_dir") from None
    except OSError as exc:
        log.warning("state_dir cannot be locked on this filesystem; make sure only one sloguard uses it",
                    extra={"path": str(path), "error": _describe(exc)})
    return fd


def prepare(state_dir: str) -> StateDir:
    """Create state_dir, test a write, take the instance lock; raise StateDirError on misconfiguration.

    A full disk (ENOSPC), a read-only filesystem (EROFS) or an exceeded quota is not misconfiguration:
    the returned StateDir names it in `degraded` and the daemon starts in memory.
    """
    path = Path(state_dir).expanduser()
    degraded = _create(path)
    if degraded:
        return StateDir(path, degraded, None)
    fd = lock(path)
    try:
        return StateDir(path, _write_test(path), fd)
    except StateDirError:
        os.close(fd)
        raise


def describe(exc: BaseException) -> str:
    """Return a short reason for a storage failure (no traceback, no SQL)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def misconfiguration(path: Path, exc: BaseException) -> StateDirError | None:
    """Return the start-up error for a store that cannot be used as configured, or None (start degraded)."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    if isinstance(exc, ForeignDatabase):
        return StateDirError(f"state_dir: {path}: not a usable sloguard store ({exc}); move it away or point "
                             "state_dir elsewhere")
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return StateDirError(f"state_dir: {path}: not a usable sloguard store ({exc}); move it away or "
                             "point state_dir elsewhere")
    read_only_fs = path.parent.is_dir() and bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM")) and not read_only_fs:
        for f in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if f.exists() and not os.access(f, os.R_OK | os.W_OK):
                return StateDirError(f"state_dir: {f}: permission denied (not readable and writable by this user)")
    if isinstance(exc, sqlite3.Error) and not is_storage_error(exc):
        return StateDirError(f"state_dir: {path}: cannot be used as the store: {exc}")
    return None


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _free(path: Path) -> str:
    free = float(shutil.disk_usage(path).free)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if free < 1024 or unit == "GiB":
            return f"{free:.3g} {unit} free" if unit != "B" else f"{free:.0f} B free"
        free /= 1024
    raise AssertionError("unreachable")


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return True  # unreadable here (another user's file): not for check to judge


def _foreign(db: Path) -> str | None:
    """Return why an existing SQLite file is not a sloguard store, read without writing (None: it is, or unreadable)."""
    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            return foreign(conn)
    except sqlite3.Error:
        return None


def report(state_dir: str) -> tuple[bool, str]:
    """Return (usable, `state_dir: ...` line) from what can be tested offline, creating and writing nothing.

    Not usable: a file, an uncreatable or unwritable directory. Usable with a warning: full or read-only
    (`sloguard run` would start degraded). Run it as the daemon's user: permissions differ per user.
    """
    path = Path(state_dir).expanduser()
    base = _nearest_existing(path)
    if not base.is_dir():
        what = "not a directory (it is a file)" if base == path else f"cannot be created: {base} is a file"
        return False, f"state_dir: {path}: {what}"
    prefix = "" if base == path else f"does not exist; would be created in {base}; "
    if os.statvfs(base).f_flag & os.ST_RDONLY:
        return True, (f"state_dir: {path}: {prefix}warning: read-only filesystem: sloguard run would start "
                      "degraded (in memory) until it is writable")
    if not os.access(base, os.W_OK | os.X_OK):
        what = "not writable" if base == path else f"cannot be created: {base} is not writable"
        return False, f"state_dir: {path}: {what} by this user (permission denied)"
    if shutil.disk_usage(base).free < 1 << 20:
        return True, (f"state_dir: {path}: {prefix}warning: disk full ({_free(base)}): sloguard run would start "
                      "degraded (in memory) until space is freed")
    db = path / DB_NAME
    if db.is_file() and db.stat().st_size and not _is_sqlite(db):
        return False, f"state_dir: {db}: not a usable sloguard store (not an SQLite file); move it away"
    if db.is_file() and db.stat().st_size and (why := _foreign(db)):
        return False, f"state_dir: {db}: not a usable sloguard store (another program's database: {why}); move it away"
    pid = lock_holder(path) if base == path else None
    running = f"; in use by a running sloguard (pid {pid})" if pid else ""
    return True, f"state_dir: {path}: {prefix}writable, {_free(base)}{running}"
