"""`sloguard evaluate`: a text table per SLO by default, the JSON document with --json, bad results named by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sloguard.slo import cli

NOW = 1_800_000_000.0
CONFIG = ("version: sloguard/v1\ntargets: [{name: t, api_url: 'http://127.0.0.1:1'}]\n"
          "probes: [{name: p, target: t}]\n"
          "slos: [{name: a, target: t, objectives: [{metric: ttft, percentile: 95, threshold: 500ms}], "
          "goodput: {ttft: 500ms, target: 0.9}, error_budget_window: 1d}]\n")


def _rows(n: int = 40) -> str:
    rows = [{"ts": NOW - 10 * i, "probe": "p", "target": "t", "model": "m", "api": "chat", "ok": True,
             "ttft_s": 0.3 if i % 4 else 0.8} for i in range(n)]
    return "\n".join(json.dumps(r) for r in rows) + "\n"


def _files(tmp_path: Path, results: str) -> list[str]:
    (tmp_path / "c.yaml").write_text(CONFIG)
    (tmp_path / "r.jsonl").write_text(results)
    return ["-c", str(tmp_path / "c.yaml"), "--results", str(tmp_path / "r.jsonl")]


def test_text_table_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(_files(tmp_path, _rows())) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("40 probe results, evaluated at 2027-01-15 08:00:00 UTC")
    assert "SLO a (probe, target t): BREACH" in lines
    header = next(ln for ln in lines if ln.startswith("CHECK"))
    assert header.split()[1] == "5m"
    goodput = next(ln for ln in lines if ln.startswith("goodput >= 90.0%"))
    assert "75.0% BREACH" in goodput and "0.9 " not in out
    assert any(ln.startswith("p95 ttft <= 500ms") and "800ms BREACH" in ln for ln in lines)


def test_json_with_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*_files(tmp_path, _rows()), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["results"] == 40 and doc["slos"][0]["name"] == "a"


def _row(**fields: object) -> str:
    return json.dumps({"ts": NOW, "probe": "p", "target": "t", "model": "m", "api": "chat", "ok": True,
                       "ttft_s": 0.3, "e2e_s": 0.5, **fields}) + "\n"


@pytest.mark.parametrize(("results", "message"), [
    ('{"a": 1}\n', "r.jsonl:1: ts, probe, target, model, api, ok: missing"),
    ("\n\nnot json\n", "r.jsonl:3: not JSON (lines of `sloguard probe --json`; no NaN)"),
    ("[1]\n", "r.jsonl:1: line: not an object"),
    (_row() + _row(e2e_s=1e308), "r.jsonl:2: e2e_s: out of range (not in [0, 604800])"),
    (_row(ttft_s="fast"), "r.jsonl:1: ttft_s: not a number"),
    (_row(ok="false"), "r.jsonl:1: ok: not a boolean"),
    (_row().replace('"ttft_s": 0.3', '"ttft_s": NaN'), "r.jsonl:1: not JSON"),
    (_row(output_tokens=2**63), "r.jsonl:1: output_tokens: out of range"),
    (_row(ts=-5), "r.jsonl:1: ts: out of range"),
])
def test_bad_results_are_one_line_naming_the_line(tmp_path: Path, results: str, message: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(_files(tmp_path, results)) == 2  # never 70 (internal error)
    err = capsys.readouterr().err
    assert message in err and "__init__" not in err and err.count("\n") == 1, err
