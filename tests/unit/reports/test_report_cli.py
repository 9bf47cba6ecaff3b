"""`sloguard report` on bench results files: exit codes, formats, bad input (one line, exit 2), no secrets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sloguard.reports.cli import main, thresholds
from sloguard.sim.benchfile import closed_run, write


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Bench runs from the simulator's model: two of release a, one 30 % slower (release b)."""
    tmp = tmp_path_factory.mktemp("bench")
    out = {}
    for name, seed, scale, label in (("a1", 1, 1.0, "a"), ("a2", 2, 1.0, "a"), ("b", 3, 1.3, "b")):
        out[name] = tmp / f"{name}.jsonl"
        write(str(out[name]), closed_run(seed, [1, 4], 300, time_scale=scale, labels={"release": label},
                                         background_rps=0.0))
    return out


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    got = capsys.readouterr()
    return code, got.out, got.err


def test_a_slower_release_fails_only_with_fail_on(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--baseline", str(files["a1"]), "--candidate", str(files["b"]),
                       "--fail-on", "regression")
    assert code == 1 and out.startswith("# sloguard regression report: a → b") and "**REGRESSION" in out
    code, _, _ = run(capsys, "--baseline", str(files["a1"]), "--candidate", str(files["b"]))
    assert code == 0


def test_an_a_a_pair_passes(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--baseline", str(files["a1"]), "--candidate", str(files["a2"]), "--fail-on",
                       "regression")
    assert code == 0 and "REGRESSION" not in out.splitlines()[2]


def test_json_holds_every_number_and_the_formats_agree(files: dict[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--baseline", str(files["a1"]), "--candidate", str(files["b"]), "--out-dir",
                       str(tmp_path / "r"))
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert code == 0 and json.loads(out)["verdict"] == doc["verdict"] == "regression"
    assert doc["schema"] == "sloguard-report/1" and len(doc["loads"]) == 2
    assert {c["scope"] for c in doc["cells"]} >= {"overall", "load:concurrency 1", "load:concurrency 4"}
    md = (tmp_path / "r" / "report.md").read_text()
    html = (tmp_path / "r" / "report.html").read_text()
    p95 = next(c for c in doc["cells"] if c["metric"] == "ttft" and c["stat"] == "p95" and c["scope"] == "overall")
    shown = f"{p95['delta'] * 100:+.1f} %"
    assert shown in md and shown in html
    assert "<" not in md.replace("<redacted>", "")  # a PR comment: no HTML
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")


@pytest.mark.parametrize(("content", "message"), [
    ("", "empty file"),
    ('{"type": "header", "schema": "sloguard-bench/1"}\n{"type": "requ', "truncated file"),
    ('{"type": "request"}\n', "not the header"),
    ('{"type": "header", "schema": "sloguard-bench/9"}\n', "schema 'sloguard-bench/9'"),
    ('not json\n{"type": "end"}\n', ":1: not JSON"),
])
def test_bad_files_give_one_line_and_exit_2(files: dict[str, Path], tmp_path: Path, content: str, message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    code, _, err = run(capsys, "--baseline", str(bad), "--candidate", str(files["a1"]))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def _edit(src: Path, dst: Path, change: Any) -> Path:
    lines = [json.loads(x) for x in src.read_text().splitlines()]
    change(lines)
    dst.write_text("".join(json.dumps(x) + "\n" for x in lines).replace('"__NaN__"', "NaN"))
    return dst


@pytest.mark.parametrize(("change", "message"), [
    (lambda rs: rs[3].update(ttft_s="__NaN__"), "NaN is not a number JSON allows"),
    (lambda rs: rs[3].update(ttft_s=-0.5), "ttft_s is negative (-0.5) in request 3"),
    (lambda rs: [r.update(ok=False, outcome="error", error="http 500", ttft_s=None) for r in rs
                 if r["type"] == "request"], "0 successful request(s) of 600; a comparison needs at least 20 "
                                             "successful requests in the baseline"),
    (lambda rs: rs[0]["workload"].update(max_tokens=128, prompt_mix=[{"tokens": 2048, "weight": 1}]),
     "max_tokens: baseline 128, candidate 64; prompt_mix: baseline {2048: 1}, candidate {64: 50"),
    (lambda rs: rs[0]["plan"].update(kind="rate"), "load_kind: baseline rate, candidate concurrency"),
])
def test_hand_edited_and_mismatched_files(files: dict[str, Path], tmp_path: Path, change: Any, message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = _edit(files["a2"], tmp_path / "edited.jsonl", change)
    code, _, err = run(capsys, "--baseline", str(bad), "--candidate", str(files["a1"]))
    assert code == 2 and message in err and "Traceback" not in err, err


def test_allow_mismatch_compares_anyway_and_says_so(files: dict[str, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    bad = _edit(files["a2"], tmp_path / "edited.jsonl", lambda rs: rs[0]["workload"].update(max_tokens=128))
    code, out, _ = run(capsys, "--baseline", str(bad), "--candidate", str(files["a1"]), "--allow-mismatch")
    assert code == 0 and "compared despite a different workload: max_tokens: baseline 128, candidate 64" in out


def test_missing_file_and_bad_options(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--baseline", "/nope.jsonl", "--candidate", str(files["a1"]))
    assert code == 2 and err.strip() == "sloguard report: /nope.jsonl: no such file"
    code, _, err = run(capsys, "--baseline", str(files["a1"]), "--candidate", str(files["a2"]), "--threshold", "ttft")
    assert code == 2 and "--threshold 'ttft'" in err
    with pytest.raises(SystemExit) as exc:
        main(["--baseline", "x"])
    assert exc.value.code == 2


def test_thresholds_parse_fractions_and_percentages() -> None:
    got = thresholds(["ttft=0.1", "error_rate=2%", "e2e=7.5%"])
    assert got["ttft"] == 0.1 and got["error_rate"] == 0.02 and got["e2e"] == 0.075 and got["tpot"] == 0.05


def test_secrets_never_reach_the_report(files: dict[str, Path], tmp_path: Path,
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
    leaky = _edit(files["a2"], tmp_path / "leaky.jsonl",
                  lambda rs: rs[0].update(labels={"release": "a", "note": f"token {secret}"},
                                          target={**rs[0]["target"], "api_url": f"http://h/?key={secret}"}))
    for fmt in ("md", "html", "json"):
        code, out, _ = run(capsys, "--baseline", str(files["a1"]), "--candidate", str(leaky), "-c", str(cfg),
                           "--format", fmt)
        assert code == 0 and secret not in out and "redacted" in out
