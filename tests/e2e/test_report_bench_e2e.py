"""`sloguard report` on results files written by the real `sloguard bench` against `sloguard sim`.

Release a is benched twice (an A/A pair: exit 0 with --fail-on regression), release b is the same server
with every engine step 1.3× as long (the simulator's `latency_multiplier` fault: exit 1). The A/A pair benches
one simulator in alternation, ABBA over the rounds (a1 then a2, then a2 then a1, ...), so whatever the host does
meanwhile (a shared CI runner at load 30) falls on both sides alike: run side by side against two simulators,
the two processes' share of a loaded host differed by itself (p50 ITL +6.1 % [+3.1, +9.2] at load ~10, one
round +9 %, the other +2 %) and read "regression". Release b runs beside the pair against its own simulator.
Concurrency 1 on servers without background traffic: each request runs alone on its server; a batching
sweep's run-level state is benchmarks/report_power.py's `bench-c8` row. Then bad, hand-edited and
mismatched files: one line, exit 2, never a traceback; no secret reaches a report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.procs import http_post, simulator

from sloguard.bench.schema import schema
from sloguard.reports.cli import main

pytestmark = pytest.mark.e2e
SLOWER = 1.3  # release b: every engine step this much longer
ROUNDS = 4  # even: ABBA balances a drift of the host over the span
REQUESTS = 53  # per round: 212 per side, p50 and p95 judged (p95 needs 100 values per side), p99 not
HANG_GUARD_S = 600  # a stuck bench fails instead of blocking CI; not a speed claim


def _config(tmp: Path, url: str) -> Path:
    tmp.mkdir(exist_ok=True)
    cfg = tmp / "sloguard.yaml"
    cfg.write_text(f"""version: sloguard/v1
targets:
  - {{name: sim, engine: auto, api_url: "{url}", metrics_url: "{url}/metrics", model: sim-llama-3-8b}}
probes:
  - {{name: chat, target: sim, api: chat, max_tokens: 16, timeout: 10s,
     prompts: [{{tokens: 64, weight: 50}}, {{tokens: 128, weight: 35}}, {{tokens: 256, weight: 15}}]}}
slos:
  - name: chat-latency
    target: sim
    objectives: [{{metric: ttft, percentile: 95, threshold: 1s}}]
""")
    return cfg


def _bench(cfg: Path, out: Path, release: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sloguard", "bench", "-c", str(cfg), "--target", "sim", "-o",
                             str(out), "--concurrency", "1", "--requests", str(REQUESTS), "--warmup", "3", "--label",
                             f"release={release}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Path]]]:
    """Real bench runs: release a twice (one simulator, the two in alternation), release b (every step 1.3×)."""
    tmp = tmp_path_factory.mktemp("bench")
    extra = ("--background-rps", "0", "--time-scale", "0.5")
    with simulator(tmp, seed=5, extra=extra) as sim_a, simulator(tmp, seed=5, extra=extra) as sim_b:
        http_post(f"{sim_b.url}/sim/faults", {"latency_multiplier": SLOWER})
        cfg = {name: _config(tmp / name, sim.url) for name, sim in (("a1", sim_a), ("a2", sim_a), ("b", sim_b))}
        out: dict[str, list[Path]] = {name: [] for name in cfg}

        def bench(name: str, k: int) -> subprocess.Popen[str]:
            out[name].append(cfg[name].parent / f"{name}-{k}.jsonl")
            return _bench(cfg[name], out[name][-1], name[0])

        def done(proc: subprocess.Popen[str]) -> None:
            _, err = proc.communicate(timeout=HANG_GUARD_S)
            assert proc.returncode == 0, err

        for k in range(ROUNDS):
            beside = bench("b", k)
            for name in ("a1", "a2") if k % 2 == 0 else ("a2", "a1"):
                done(bench(name, k))
            done(beside)
        yield out


def paths(files: list[Path]) -> list[str]:
    return [str(f) for f in files]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    got = capsys.readouterr()
    return code, got.out, got.err


def test_the_files_are_the_bench_schema(files: dict[str, list[Path]]) -> None:
    validator = jsonschema.Draft202012Validator(schema())
    for path in (p for run in files.values() for p in run):
        for line in path.read_text().splitlines():
            validator.validate(json.loads(line))


def test_a_slower_release_fails_only_with_fail_on(files: dict[str, list[Path]],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--baseline", *paths(files["a1"]), "--candidate", *paths(files["b"]),
                       "--fail-on", "regression")
    assert code == 1 and out.startswith("# sloguard regression report: `a` → `b`") and "**REGRESSION" in out
    code, _, _ = run(capsys, "--baseline", *paths(files["a1"]), "--candidate", *paths(files["b"]))
    assert code == 0


def test_an_a_a_pair_passes(files: dict[str, list[Path]], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--baseline", *paths(files["a1"]), "--candidate", *paths(files["a2"]), "--fail-on",
                       "regression")
    assert code == 0 and "REGRESSION" not in out.splitlines()[2], out


def test_the_command_line_gives_the_exit_codes(files: dict[str, list[Path]]) -> None:
    """The same through `python -m sloguard report` (the guard, the delegation)."""
    def report(cand: str) -> int:
        return subprocess.run([sys.executable, "-m", "sloguard", "report", "--baseline", *paths(files["a1"]),
                               "--candidate", *paths(files[cand]), "--fail-on", "regression"], capture_output=True,
                              text=True, timeout=HANG_GUARD_S, check=False).returncode
    assert (report("a2"), report("b")) == (0, 1)


def test_json_holds_every_number_and_the_formats_agree(files: dict[str, list[Path]], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--baseline", *paths(files["a1"]), "--candidate", *paths(files["b"]), "--out-dir",
                       str(tmp_path / "r"))
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert code == 0 and json.loads(out)["verdict"] == doc["verdict"] == "regression"
    assert doc["schema"] == "sloguard-report/1" and [ld["label"] for ld in doc["loads"]] == ["concurrency 1"]
    # every step 1.3x: E2E (16 decode steps) a regression, its interval above no change; how far above is the
    # host's to say (+21 % at load 25, +5 % at load 30); TTFT's p95 (one prefill step of ~15 ms) may read "not
    # enough data" at 210 requests on a busy host, whose scheduling noise widens that tail
    e2e = next(c for c in doc["cells"] if c["metric"] == "e2e" and c["stat"] == "p50" and c["scope"] == "overall")
    assert e2e["verdict"] == "regression" and e2e["ci"][0] > 0, e2e
    (objective,) = doc["objectives"]  # from the bench's own config, found beside the results files
    assert objective["what"] == "p95 ttft" and objective["threshold"] == 1.0
    md = (tmp_path / "r" / "report.md").read_text()
    html = (tmp_path / "r" / "report.html").read_text()
    shown = f"{e2e['delta'] * 100:+.1f} %"
    assert shown in md and shown in html
    assert "<" not in md.replace("<redacted>", "")  # a PR comment: no HTML
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")


@pytest.mark.parametrize(("content", "message"), [
    ("", "empty file"),
    ('{"type": "header", "schema": "sloguard.bench/v1"}\n{"type": "requ', "truncated file"),
    ('{"type": "request"}\n', "not the header"),
    ('{"type": "header", "schema": "sloguard-bench/1"}\n', "schema 'sloguard-bench/1'; this sloguard reads "
                                                          "'sloguard.bench/v1'"),
    ('not json\n{"type": "end"}\n', ":1: not JSON"),
    ('{"type": "max_load"}\n', "not a results record (type 'max_load'"),
])
def test_bad_files_give_one_line_and_exit_2(files: dict[str, list[Path]], tmp_path: Path, content: str,
                                            message: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    code, _, err = run(capsys, "--baseline", str(bad), "--candidate", str(files["a1"][0]))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def _edit(src: Path, dst: Path, change: Any) -> Path:
    lines = [json.loads(x) for x in src.read_text().splitlines()]
    change(lines)
    dst.write_text("".join(json.dumps(x) + "\n" for x in lines).replace('"__NaN__"', "NaN"))
    return dst


def _fail_all(rs: list[dict[str, Any]]) -> None:
    for r in rs:
        if r["type"] == "request":
            r.update(ok=False, error="http 500", status_code=500, ttft_s=None, ttfot_s=None, e2e_s=None)


@pytest.mark.parametrize(("change", "message"), [
    (lambda rs: rs[3].update(ttft_s="__NaN__"), ":4: not JSON (one JSON object per line; no NaN or Infinity)"),
    (lambda rs: rs[3].update(ttft_s=-0.5), ":4: ttft_s: expected float >= 0.0"),
    (lambda rs: rs[3].pop("e2e_sched_s"), ":4: request record lacks e2e_sched_s (sloguard.bench/v1)"),
    (_fail_all, f"0 successful request(s) of {REQUESTS}; a comparison needs at least 20 successful requests in "
                "the baseline"),
    (lambda rs: rs[0]["workload"].update(max_tokens=128, prompts=[[2048, 1]]),
     "workload.max_tokens: baseline 128, candidate 16; workload.prompts: baseline {2048: 1}, candidate {64: 50"),
    (lambda rs: rs[0]["load"].update(kind="rate"), "load.kind: baseline rate, candidate concurrency"),
])
def test_hand_edited_and_mismatched_files(files: dict[str, list[Path]], tmp_path: Path, change: Any, message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = _edit(files["a2"][0], tmp_path / "edited.jsonl", change)
    code, _, err = run(capsys, "--baseline", str(bad), "--candidate", str(files["a1"][0]))
    assert code == 2 and message in err and "Traceback" not in err, err


def test_allow_mismatch_compares_anyway_and_says_so(files: dict[str, list[Path]], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    bad = _edit(files["a2"][0], tmp_path / "edited.jsonl", lambda rs: rs[0]["workload"].update(max_tokens=128))
    code, out, _ = run(capsys, "--baseline", str(bad), "--candidate", str(files["a1"][0]), "--allow-mismatch")
    assert code == 0 and "compared despite a different workload: workload.max_tokens: baseline 128, candidate 16" in out
    assert "workload_digest does not match the header's workload and load (edited?)" in out


def test_missing_file_and_bad_options(files: dict[str, list[Path]], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--baseline", "/nope.jsonl", "--candidate", str(files["a1"][0]))
    assert code == 2 and err.strip() == "sloguard report: /nope.jsonl: no such file"
    code, _, err = run(capsys, "--baseline", *paths(files["a1"]), "--candidate", *paths(files["a2"]), "--threshold",
                       "ttft")
    assert code == 2 and "--threshold 'ttft'" in err
    with pytest.raises(SystemExit) as exc:
        main(["--baseline", "x"])
    assert exc.value.code == 2


def test_secrets_never_reach_the_report(files: dict[str, list[Path]], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    secret = "sk-live-0123456789abcdef"
    key = tmp_path / "key"
    key.write_text(secret)
    cfg = tmp_path / "sloguard.yaml"
    cfg.write_text(f"""version: sloguard/v1
state_dir: {tmp_path / 'state'}
targets: [{{name: sim, api_url: "http://127.0.0.1:1", api_key_file: {key}}}]
slos: [{{name: s, target: sim, objectives: [{{metric: ttft, percentile: 95, threshold: 1s}}]}}]
""")
    leaky = _edit(files["a2"][0], tmp_path / "leaky.jsonl",
                  lambda rs: rs[0].update(labels={"release": "a", "note": f"token {secret}"},
                                          target={**rs[0]["target"], "api_url": f"http://h/?key={secret}"}))
    for fmt in ("md", "html", "json"):
        code, out, _ = run(capsys, "--baseline", str(files["a1"][0]), "--candidate", str(leaky), "-c", str(cfg),
                           "--format", fmt)
        assert code == 0 and secret not in out and "redacted" in out
