"""Every subcommand, fed broken inputs or a closed stdout (`| head`), ends in a clear line, never a traceback.

Each case runs `python -m sloguard ...` as a real process and checks its exit code and that stderr says what
was wrong (and not "internal error": the guard in sloguard/guard.py is a net, not the way bad input is
handled). A subcommand added later gets the generic cases (an unknown flag; --help into a closed pipe)
automatically; add its specific bad inputs to CASES.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.procs import PATIENCE, ROOT

from sloguard.cli import DELEGATED, _parser

pytestmark = pytest.mark.e2e
VLLM = ROOT / "tests" / "fixtures" / "metrics" / "captured" / "vllm-v1-dynamo-2026-01.txt"
PIPE = 141  # stdout closed under the command: coreutils' exit code when killed by SIGPIPE


@dataclass(frozen=True)
class Case:
    """argv after `sloguard`; `{d}` is the scratch directory, `{busy}` a port held open by the test."""

    argv: str
    codes: tuple[int, ...]
    says: str = ""  # a substring stderr must contain
    closed_stdout: bool = False


def _subcommands() -> list[str]:
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(set(sub.choices) | set(DELEGATED))  # type: ignore[arg-type]


GOOD = """version: sloguard/v1
listen: "127.0.0.1:0"
state_dir: "{d}/state"
targets: [{name: t, engine: vllm, metrics_url: "http://127.0.0.1:9/metrics", api_url: "http://127.0.0.1:9",
            model: m}]
probes: [{name: p, target: t, interval: 5s, timeout: 2s, max_tokens: 4}]
slos: [{name: s, target: t, objectives: [{metric: ttft, percentile: 95, threshold: 1s}]}]
"""
FILES = {
    "good.yaml": GOOD,
    # `run` takes a lock on state_dir: each run case gets its own, as they run side by side
    **{f"run-{k}.yaml": GOOD.replace("{d}/state", "{d}/state-" + k) for k in "abcd"},
    "noprobes.yaml": "version: sloguard/v1\n",
    "invalid.yaml": "version: sloguard/v1\nslos: [{name: a, target: b, objectivs: []}]\n",
    "p95.yaml": "version: sloguard/v1\nslos: [{name: a, target: b, objectives: [{metric: ttft, percentile: p95, "
                "threshold: 1s}]}]\n",
    "notyaml.yaml": "key: [unclosed\n",
    "list.yaml": "- a\n- b\n",
    "missing-keys.jsonl": '{"a": 1}\n',
    "notjson.jsonl": "not json\n",
    "list.jsonl": "[1, 2]\n",
    "empty.jsonl": "",
    "page.html": "<html><body>hello</body></html>\n",
    "node.prom": '# TYPE node_cpu_seconds_total counter\nnode_cpu_seconds_total{cpu="0",mode="idle"} 12\n',
    "afile": "not a directory\n",
    "state-is-a-file.yaml": "version: sloguard/v1\nlisten: \"127.0.0.1:0\"\nstate_dir: \"{d}/afile\"\n",
}

CASES: dict[str, Case] = {
    # check
    "check-missing": Case("check -c {d}/nope.yaml", (2,), "nope.yaml"),
    "check-dir": Case("check -c {d}", (2,), "directory"),
    "check-binary": Case("check -c {d}/binary.yaml", (2,), "binary.yaml"),
    "check-not-yaml": Case("check -c {d}/notyaml.yaml", (2,), "line 2"),
    "check-list": Case("check -c {d}/list.yaml", (2,), "mapping"),
    "check-unknown-key": Case("check -c {d}/invalid.yaml", (2,), "did you mean 'objectives'?"),
    "check-p95": Case("check -c {d}/p95.yaml", (2,), "write the number without 'p': 95"),
    "check-ok-closed": Case("check -c {d}/good.yaml", (PIPE,), closed_stdout=True),
    # config, version, unknown command
    "config-bogus": Case("config bogus", (2,), "invalid choice"),
    "config-schema-closed": Case("config schema", (PIPE,), closed_stdout=True),
    "version-closed": Case("version", (PIPE,), closed_stdout=True),
    "dash-version-closed": Case("--version", (0, PIPE), closed_stdout=True),  # argparse's action, like --help
    "no-such-command": Case("frobnicate", (2,), "invalid choice"),
    # run: start-up errors are one line and exit 2
    "run-missing-config": Case("run -c {d}/nope.yaml", (2,), "nope.yaml"),
    "run-invalid-config": Case("run -c {d}/invalid.yaml", (2,), "objectivs"),
    "run-port-in-use": Case("run -c {d}/run-a.yaml --web.listen-address 127.0.0.1:{busy}", (2,),
                            "cannot listen on 127.0.0.1:{busy}: address already in use"),
    "run-not-local": Case("run -c {d}/run-b.yaml --web.listen-address 192.0.2.1:9478", (2,),
                          "cannot listen on 192.0.2.1:9478: no local interface has this address"),
    "run-bad-address": Case("run -c {d}/run-c.yaml --web.listen-address bogus", (2,), "invalid listen address"),
    "run-state-dir-is-a-file": Case("run -c {d}/state-is-a-file.yaml", (2,), "afile"),
    "check-state-dir-is-a-file": Case("check -c {d}/state-is-a-file.yaml", (2,), "afile"),
    "run-bad-web-config": Case("run -c {d}/run-d.yaml --web.config.file {d}/nope.yml", (2,), "nope.yml"),
    # evaluate
    "evaluate-missing-keys": Case("evaluate -c {d}/good.yaml --results {d}/missing-keys.jsonl", (2,),
                                  "missing-keys.jsonl:1: ts, probe, target, model, api, ok: missing"),
    "evaluate-not-json": Case("evaluate -c {d}/good.yaml --results {d}/notjson.jsonl", (2,),
                              "notjson.jsonl:1: not JSON"),
    "evaluate-list": Case("evaluate -c {d}/good.yaml --results {d}/list.jsonl", (2,),
                          "list.jsonl:1: line: not an object"),
    # record, replay, notify-test
    "record-missing-config": Case("record -c {d}/nope.yaml -o {d}/rec.jsonl.gz", (2,), "nope.yaml: cannot read"),
    "record-bad-out": Case("record -c {d}/good.yaml -o {d}/no-dir/rec.jsonl.gz --duration 1", (2,), "no-dir"),
    "replay-missing": Case("replay {d}/nope.jsonl.gz", (2,), "nope.jsonl.gz: cannot replay"),
    "replay-not-a-recording": Case("replay {d}/good.yaml", (2,), "good.yaml: cannot replay"),
    "notify-test-unknown": Case("notify-test -c {d}/good.yaml --notifier x", (2,), "unknown notifier x"),
    "notify-test-invalid": Case("notify-test -c {d}/invalid.yaml", (2,), "objectivs"),
    "evaluate-missing-file": Case("evaluate -c {d}/good.yaml --results {d}/nope.jsonl", (2,), "nope.jsonl"),
    "evaluate-bad-at": Case("evaluate -c {d}/good.yaml --results {d}/empty.jsonl --at soon", (2,), "--at"),
    "evaluate-closed": Case("evaluate -c {d}/good.yaml --results {d}/empty.jsonl", (PIPE,), closed_stdout=True),
    # rules
    "rules-onto-a-file": Case("rules -c {d}/good.yaml -o {d}/afile", (2,), "cannot write"),
    "rules-invalid": Case("rules -c {d}/invalid.yaml -o {d}/rules", (2,), "objectivs"),
    "rules-closed": Case("rules -c {d}/good.yaml -o {d}/rules-ok", (PIPE,), closed_stdout=True),
    # inspect-metrics
    "inspect-missing": Case("inspect-metrics {d}/nope.txt", (1,), "nope.txt"),
    "inspect-html": Case("inspect-metrics {d}/page.html", (1,), "HTML"),
    "inspect-no-engine": Case("inspect-metrics {d}/node.prom", (1,), "no inference-engine metrics recognised"),
    "inspect-wrong-engine": Case(f"inspect-metrics {VLLM} --engine tgi", (1,), "it looks like vllm"),
    "inspect-binary": Case("inspect-metrics {d}/binary.yaml", (1,), ""),
    "inspect-closed-port": Case("inspect-metrics http://127.0.0.1:9/metrics", (1,), "connect"),
    "inspect-closed": Case(f"inspect-metrics {VLLM}", (PIPE,), closed_stdout=True),
    # probe
    "probe-missing-config": Case("probe -c {d}/nope.yaml --once", (2,), "nope.yaml"),
    "probe-no-probes": Case("probe -c {d}/noprobes.yaml --once", (2,), "no matching probes"),
    "probe-unknown-probe": Case("probe -c {d}/good.yaml --once --probe nosuch", (2,), "no matching probes"),
    "probe-closed": Case("probe -c {d}/good.yaml --once", (PIPE,), closed_stdout=True),
    # sim
    "sim-bad-listen": Case("sim --listen bogus", (2,), "HOST:PORT"),
    "sim-port-in-use": Case("sim --listen 127.0.0.1:{busy}", (1,), "address already in use"),
    "sim-closed": Case("sim --listen 127.0.0.1:0", (PIPE,), closed_stdout=True),
    # canary (the runs that need torch are in tests/unit/probes; these fail before spawning it)
    "canary-bad-timeout": Case("canary --timeout soon", (2,), "timeout"),
    "canary-bad-device": Case("canary --device tpu", (2,), "device"),
    # status
    "status-closed-port": Case("status --url http://127.0.0.1:9", (2,), "cannot read http://127.0.0.1:9/api/v1/slos"),
    "status-bad-url": Case("status --url bogus --json", (2,), "bogus"),
    # demo
    "demo-bad-duration": Case("demo --duration soon", (2,), "invalid duration"),
    "demo-port-in-use": Case("demo --listen 127.0.0.1:{busy} --duration 30s", (1,), "--listen"),
    "demo-closed": Case("demo --duration 1s", (PIPE,), closed_stdout=True),
    # report
    "report-missing": Case("report --baseline {d}/nope.jsonl --candidate {d}/nope.jsonl", (2,), "nope.jsonl: no such"),
    "report-not-json": Case("report --baseline {d}/notjson.jsonl --candidate {d}/empty.jsonl", (2,), "not JSON"),
    "report-empty": Case("report --baseline {d}/empty.jsonl --candidate {d}/empty.jsonl", (2,), "empty file"),
    "report-not-bench": Case("report --baseline {d}/missing-keys.jsonl --candidate {d}/empty.jsonl", (2,),
                             "not a results record"),
    "report-bad-store": Case("report --baseline store:junk --candidate store:junk --state-dir {d}", (2,),
                             "neither KEY=VALUE nor FROM..TO"),
    "report-no-store": Case("report --baseline store:release=a --candidate store:release=b --state-dir {d}", (2,),
                            "no store at"),
    "report-bad-prom": Case("report --baseline prom:nowhere --candidate prom:nowhere", (2,), "expected prom:URL"),
    "report-prom-down": Case("report --baseline prom:http://127.0.0.1:9@1..2 --candidate prom:http://127.0.0.1:9@1..2",
                             (2,), "cannot query Prometheus"),
    "report-daemon-down": Case("report --baseline store:release=a --candidate store:release=b --daemon "
                               "http://127.0.0.1:9", (2,), "cannot reach the daemon"),
    "report-bad-config": Case("report -c {d}/invalid.yaml --baseline store:release=a --candidate store:release=b",
                              (2,), "objectivs"),
    "report-output-dir-is-a-file": Case("report --baseline {d}/bench.jsonl --candidate {d}/bench.jsonl "
                                        "--out-dir {d}/afile", (2,), "afile"),
    "report-closed": Case("report --baseline {d}/bench.jsonl --candidate {d}/bench.jsonl", (PIPE,),
                          closed_stdout=True),
    # bench (the runs against a server are in tests/e2e/test_bench_sim.py)
    "bench-missing-config": Case("bench -c {d}/nope.yaml --target t --concurrency 1 -o {d}/r.jsonl", (2,),
                                 "nope.yaml"),
    "bench-no-load": Case("bench -c {d}/good.yaml --target t -o {d}/r.jsonl", (2,), "--concurrency"),
    "bench-unreachable": Case("bench -c {d}/good.yaml --target t --concurrency 1 -o {d}/r.jsonl", (2,),
                              "is not reachable"),
    "bench-schema-closed": Case("bench --print-schema", (PIPE,), closed_stdout=True),
}


def _generic() -> dict[str, Case]:
    cases = {}
    for cmd in _subcommands():
        cases[f"{cmd}-unknown-flag"] = Case(f"{cmd} --no-such-flag", (2,), "")
        # argparse swallows the failed write of --help and exits 0; either way, no traceback
        cases[f"{cmd}-help-closed"] = Case(f"{cmd} --help", (0, PIPE), closed_stdout=True)
    return cases


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    d = tmp_path_factory.mktemp("broken")
    for name, text in FILES.items():
        (d / name).write_text(text.replace("{d}", str(d)))
    (d / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    from sloguard.sim.benchfile import closed_run, write

    write(str(d / "bench.jsonl"), closed_run(1, [2], 60, background_rps=0.0))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield d, busy.getsockname()[1]


def _run(case: Case, d: Path, busy: int) -> tuple[int, str, str]:
    argv = case.argv.format(d=d, busy=busy).split()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("SLOGUARD_TRACEBACK", None)
    if not case.closed_stdout:
        done = subprocess.run([sys.executable, "-m", "sloguard", *argv], capture_output=True, text=True, cwd=d,
                              env=env, timeout=60 * PATIENCE, stdin=subprocess.DEVNULL)
        return done.returncode, done.stdout, done.stderr
    read, write = os.pipe()
    os.close(read)  # closed before the command starts: its first write meets EPIPE, as under `| head -0`
    try:
        proc = subprocess.Popen([sys.executable, "-m", "sloguard", *argv], stdout=write, stderr=subprocess.PIPE,
                                text=True, cwd=d, env=env, stdin=subprocess.DEVNULL)
    finally:
        os.close(write)
    _, err = proc.communicate(timeout=60 * PATIENCE)
    return proc.returncode, "", err


@pytest.fixture(scope="module")
def outcomes(scratch: tuple[Path, int]) -> dict[str, tuple[int, str, str]]:
    d, busy = scratch
    cases = {**_generic(), **CASES}
    with ThreadPoolExecutor(max_workers=4) as pool:  # ~60 interpreter starts; most wait on imports
        futures = {name: pool.submit(_run, case, d, busy) for name, case in cases.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("name", sorted({**_generic(), **CASES}))
def test_no_traceback(name: str, outcomes: dict[str, tuple[int, str, str]], scratch: tuple[Path, int]) -> None:
    case = {**_generic(), **CASES}[name]
    code, out, err = outcomes[name]
    shown = f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
    assert "Traceback" not in out + err, shown
    assert "internal error" not in err and "Exception ignored" not in err, shown
    assert code in case.codes, shown
    if code not in (0, PIPE):
        assert err.strip(), "a failing command must say why on stderr\n" + shown
    if case.says:
        assert case.says.format(d=scratch[0], busy=scratch[1]) in err, shown


def test_every_subcommand_has_specific_cases() -> None:
    """The generic cases are a floor: a subcommand with inputs of its own needs them in CASES."""
    covered = {c.argv.split()[0] for c in CASES.values()}
    assert set(_subcommands()) <= covered | {"version"}, set(_subcommands()) - covered
