"""HostSource against real child processes: matching by name, cmdline regex and pid file; cold starts."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from support.exposition import promtool_check, samples

from sloguard.config.spec import HostSpec, ProcessSpec
from sloguard.sources.host import HostSource, count_restart

UNSEEN = (-1, -1.0)


class Children:
    """Start and stop real child processes that block on stdin."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *argv: str) -> subprocess.Popen[bytes]:
        cmd = list(argv) or [sys.executable, "-c", "import sys; sys.stdin.read()"]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE)
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen[bytes]) -> None:
        p.kill()
        p.wait()


@pytest.fixture
def children() -> Iterator[Children]:
    kids = Children()
    yield kids
    for p in kids.procs:
        if p.poll() is None:
            kids.stop(p)


def _collect(src: HostSource) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return samples(list(asyncio.run(src.collect()).families))


def _v(got: dict[Any, float], name: str, **labels: str) -> float | None:
    return got.get((name, frozenset(labels.items())))


def _marker_child(kids: Children, marker: str) -> subprocess.Popen[bytes]:
    return kids.start(sys.executable, "-c", "import sys; sys.stdin.read()", marker)


@pytest.mark.parametrize(("prev", "now", "expect"), [
    (UNSEEN, (10, 1.0), ((10, 1.0), False)),     # running when we start: not a cold start
    (UNSEEN, None, ((0, 0.0), False)),           # absent at start ...
    ((0, 0.0), (10, 1.0), ((10, 1.0), True)),    # ... then it starts: a cold start
    ((10, 1.0), (10, 1.0), ((10, 1.0), False)),  # same process
    ((10, 1.0), None, ((10, 1.0), False)),       # went down: remembered
    ((10, 1.0), (11, 2.0), ((11, 2.0), True)),   # new pid and start time
    ((10, 1.0), (10, 60.0), ((10, 60.0), True)),  # pid reused by a new process
    # the same process, its start read 1 s off: /proc/stat's btime flipped between create_time and boot_time
    ((10, 100.0), (10, 101.0), ((10, 101.0), False)),
    ((10, 100.0), (10, 99.0), ((10, 99.0), False)),
])
def test_count_restart(prev: tuple[int, float], now: tuple[int, float] | None, expect: Any) -> None:
    assert count_restart(prev, now) == expect


def test_match_by_cmdline_regex_reads_figures(children: Children) -> None:
    marker = f"sloguard-test-{uuid.uuid4().hex}"
    child = _marker_child(children, marker)
    src = HostSource(HostSpec(processes=[ProcessSpec(name="srv", cmdline_regex=marker)]))
    got = _collect(src)
    ps = psutil.Process(child.pid)
    assert _v(got, "sloguard_process_up", process="srv") == 1.0
    assert _v(got, "sloguard_process_start_time_seconds", process="srv") == ps.create_time()
    assert (_v(got, "sloguard_process_resident_memory_bytes", process="srv") or 0) > 0
    assert (_v(got, "sloguard_process_threads", process="srv") or 0) >= 1
    assert (_v(got, "sloguard_process_open_fds", process="srv") or 0) >= 3
    for mode in ("user", "system"):
        assert _v(got, "sloguard_process_cpu_seconds_total", process="srv", mode=mode) is not None


def test_match_by_process_name(children: Children, tmp_path: Path) -> None:
    name = f"sg{uuid.uuid4().hex[:10]}"  # comm is at most 15 characters
    exe = tmp_path / name
    exe.symlink_to(Path(sys.executable).resolve())
    child = children.start(str(exe), "-c", "import sys; sys.stdin.read()")
    src = HostSource(HostSpec(processes=[ProcessSpec(name="srv", process_name=name)]))
    got = _collect(src)
    assert _v(got, "sloguard_process_start_time_seconds", process="srv") == psutil.Process(child.pid).create_time()


def test_match_by_pid_file(children: Children, tmp_path: Path) -> None:
    child = children.start()
    pid_file = tmp_path / "srv.pid"
    pid_file.write_text(f"{child.pid}\n")
    spec = ProcessSpec(name="srv", pid_file=str(pid_file))
    got = _collect(HostSource(HostSpec(processes=[spec])))
    assert _v(got, "sloguard_process_start_time_seconds", process="srv") == psutil.Process(child.pid).create_time()
    pid_file.write_text("not a pid")
    assert _v(_collect(HostSource(HostSpec(processes=[spec]))), "sloguard_process_up", process="srv") == 0.0


def test_oldest_match_wins(children: Children) -> None:
    marker = f"sloguard-test-{uuid.uuid4().hex}"
    first = _marker_child(children, marker)
    _marker_child(children, marker)
    src = HostSource(HostSpec(processes=[ProcessSpec(name="srv", cmdline_regex=marker)]))
    payload = asyncio.run(src.collect()).payload
    assert payload["srv"].pid == first.pid  # type: ignore[index]


def test_restart_counts_a_cold_start(children: Children) -> None:
    marker = f"sloguard-test-{uuid.uuid4().hex}"
    child = _marker_child(children, marker)
    src = HostSource(HostSpec(processes=[ProcessSpec(name="srv", cmdline_regex=marker),
                                         ProcessSpec(name="never", cmdline_regex=marker + "-absent")]))
    steps = []
    for action in ("first", "kill", "restart", "same"):
        if action == "kill":
            children.stop(child)
        elif action == "restart":
            child = _marker_child(children, marker)
        got = _collect(src)
        steps.append((_v(got, "sloguard_process_up", process="srv"),
                      _v(got, "sloguard_server_cold_starts_total", process="srv")))
    assert steps == [(1.0, 0.0), (0.0, 0.0), (1.0, 1.0), (1.0, 1.0)]
    assert _v(got, "sloguard_process_up", process="never") == 0.0
    assert _v(got, "sloguard_process_resident_memory_bytes", process="never") is None


def test_process_appearing_after_start_is_a_cold_start(children: Children) -> None:
    marker = f"sloguard-test-{uuid.uuid4().hex}"
    src = HostSource(HostSpec(processes=[ProcessSpec(name="srv", cmdline_regex=marker)]))
    assert _v(_collect(src), "sloguard_server_cold_starts_total", process="srv") == 0.0
    _marker_child(children, marker)
    assert _v(_collect(src), "sloguard_server_cold_starts_total", process="srv") == 1.0


_SELF_CHECK = """
import asyncio, os, re
import psutil
from sloguard.config.spec import HostSpec, ProcessSpec
from sloguard.sources.host import HostSource
me = " ".join(psutil.Process(os.getpid()).cmdline())
src = HostSource(HostSpec(processes=[ProcessSpec(name="me", cmdline_regex=f"^{re.escape(me)}$")]))
families = asyncio.run(src.collect()).families
print([s.value for f in families for s in f.samples if s.name == "sloguard_process_up"])
"""


def test_never_matches_the_daemon_itself() -> None:
    # In a child with a unique command line: pytest-xdist workers share theirs, so in-process they match each other.
    marker = f"sloguard-test-{uuid.uuid4().hex}"
    out = subprocess.run([sys.executable, "-c", _SELF_CHECK, marker], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0.0]"


def test_exposition_passes_promtool(children: Children) -> None:
    marker = f"sloguard-test-{uuid.uuid4().hex}"
    _marker_child(children, marker)
    src = HostSource(HostSpec(processes=[ProcessSpec(name="srv", cmdline_regex=marker)]))
    assert promtool_check(list(asyncio.run(src.collect()).families)) == ""


class _MovedClock:
    """psutil whose wall clock moves by `shift` seconds: boot time and every process's start move with it."""

    def __init__(self) -> None:
        self.shift = 0.0
        outer = self

        class Process(psutil.Process):
            def create_time(self) -> float:
                return super().create_time() + outer.shift

        self.Process = Process
        self.Error = psutil.Error

    def boot_time(self) -> float:
        return psutil.boot_time() + self.shift


@pytest.mark.parametrize("shift", [1.0, -1.0, 3600.0])
def test_a_wall_clock_change_is_no_cold_start(children: Children, tmp_path: Path, shift: float) -> None:
    """NTP moves /proc/stat's btime (a benchmark saw four processes "restart" at once); the process did not restart."""
    child = children.start()
    pid_file = tmp_path / "srv.pid"
    pid_file.write_text(f"{child.pid}\n")
    ps = _MovedClock()
    src = HostSource(HostSpec(processes=[ProcessSpec(name="srv", pid_file=str(pid_file))]),
                     psutil_mod=ps)  # type: ignore[arg-type]
    counts = []
    for moved in (0.0, shift, 0.0):
        ps.shift = moved
        got = _collect(src)
        counts.append(_v(got, "sloguard_server_cold_starts_total", process="srv"))
        # the exported start time is the wall clock's, as read
        assert _v(got, "sloguard_process_start_time_seconds", process="srv") == pytest.approx(
            psutil.Process(child.pid).create_time() + moved)
    assert counts == [0.0, 0.0, 0.0]
    children.stop(child)
    child = children.start()  # a real restart under the moved clock still counts
    pid_file.write_text(f"{child.pid}\n")
    ps.shift = shift
    assert _v(_collect(src), "sloguard_server_cold_starts_total", process="srv") == 1.0


def test_run_queue_wait_is_read_and_a_process_matching_nothing_is_warned_about_once(
        children: Children, caplog: pytest.LogCaptureFixture) -> None:
    marker = f"sloguard-test-{uuid.uuid4().hex}"
    _marker_child(children, marker)
    src = HostSource(HostSpec(processes=[ProcessSpec(name="srv", cmdline_regex=marker),
                                         ProcessSpec(name="gone", cmdline_regex=f"{marker}-typo")]))
    with caplog.at_level("WARNING", logger="sloguard.sources.host"):
        got = _collect(src)
        _collect(src)
    assert (_v(got, "sloguard_process_cpu_wait_seconds_total", process="srv") or -1.0) >= 0.0  # Linux schedstat
    warned = [r.getMessage() for r in caplog.records if "matches no running process" in r.getMessage()]
    assert len(warned) == 1 and "gone" in warned[0] and "serving_cpu_bound" in warned[0]


def test_check_online_names_a_process_that_matches_nothing() -> None:
    from sloguard.sources.processes import unmatched

    lines = unmatched([ProcessSpec(name="engine", cmdline_regex=f"sloguard-none-{uuid.uuid4().hex}")])
    assert len(lines) == 1 and lines[0].startswith("host: process engine: matches no running process")


def test_run_queue_wait_never_goes_down_when_a_thread_exits(tmp_path: Path) -> None:
    from sloguard.sources.host import RunQueueWait

    def threads(pid: int, waits: dict[str, int]) -> None:
        task = tmp_path / str(pid) / "task"
        if task.exists():
            for old in task.iterdir():
                (old / "schedstat").unlink()
                old.rmdir()
        for tid, ns in waits.items():
            (task / tid).mkdir(parents=True, exist_ok=True)
            (task / tid / "schedstat").write_text(f"123 {ns} 7\n")

    wait = RunQueueWait(str(tmp_path))
    threads(10, {"10": 1_000_000_000, "11": 2_000_000_000})
    assert wait.read(10) == pytest.approx(3.0)
    threads(10, {"10": 1_500_000_000})  # thread 11 exited with 2 s of wait: kept
    assert wait.read(10) == pytest.approx(3.5)
    threads(20, {"20": 250_000_000})  # a new process (restart): its own count
    assert wait.read(20) == pytest.approx(0.25) and wait.read(99) is None
