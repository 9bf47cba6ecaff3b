"""A bench results file is a file a user hands us: every malformed value is `FILE:LINE: field: problem` and exit 2
(never an internal error), and a file is read in bounded memory per request (a million requests per side:
benchmarks/report_scale.py)."""

from __future__ import annotations

import json
import re
import tracemalloc
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from sloguard.cli import main
from sloguard.reports.bench import MAX_LINE_BYTES, read_bench, side_from_records
from sloguard.reports.data import DataError
from sloguard.sim.benchfile import closed_run, write


@cache
def records() -> tuple[dict[str, Any], ...]:
    return tuple(closed_run(3, [1], 40, background_rps=0.0))


def first_request() -> int:
    return next(i for i, r in enumerate(records()) if r["type"] == "request")


def with_request(**changes: Any) -> list[dict[str, Any]]:
    recs = [dict(r) for r in records()]
    recs[first_request()].update(changes)
    return recs


CASES = [
    ({"e2e_s": 1e308}, "e2e_s: expected float <= 604800.0"),
    ({"ttft_s": "fast"}, "ttft_s: expected float | null, got str"),
    ({"ok": "false"}, "ok: expected bool, got str"),
    ({"ttft_s": -0.5}, "ttft_s: expected float >= 0.0"),
    ({"e2e_s": 0.001, "ttft_s": 0.2}, "e2e_s: out of range (less than ttft_s)"),
    ({"stage": 1.5}, "stage: expected int, got float"),
    ({"prompt_bucket": "b" * 300}, "prompt_bucket: expected str of length <= 256"),
]


@pytest.mark.parametrize(("change", "problem"), CASES)
def test_a_malformed_request_is_named_by_file_line_and_field(tmp_path: Path, change: dict[str, Any],
                                                             problem: str) -> None:
    path = tmp_path / "bench.jsonl"
    write(str(path), with_request(**change))
    line = first_request() + 1
    with pytest.raises(DataError) as err:
        read_bench(str(path), "baseline")
    assert str(err.value) == f"{path}:{line}: {problem}"
    with pytest.raises(DataError) as err:  # the same records in memory: the same checks, the same words
        side_from_records(with_request(**change), "baseline", "mem")
    assert str(err.value) == f"mem:{line}: {problem}"


@pytest.mark.parametrize(("text", "problem"), [
    ('{"type":"request","ttft_s":NaN}\n', "not JSON (one JSON object per line; no NaN or Infinity)"),
    ("x" * (MAX_LINE_BYTES + 10) + "\n", f"line longer than {MAX_LINE_BYTES} bytes"),
    ('{"type": "request", "ok": tr', "the last line is cut off (truncated file?)"),
    ('{"type": "stage", "stage": 0}\n', "stage record lacks"),
])
def test_malformed_lines(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "bench.jsonl"
    head = json.dumps(records()[0])
    path.write_text(head + "\n" + text)
    with pytest.raises(DataError, match="^" + re.escape(f"{path}:2: {problem}")):
        read_bench(str(path), "baseline")


@pytest.mark.parametrize(("change", "problem"), CASES[:1])
def test_the_cli_exits_2_with_one_line(tmp_path: Path, change: dict[str, Any], problem: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    write(str(good), records())
    write(str(bad), with_request(**change))
    assert main(["report", "--baseline", str(good), "--candidate", str(bad), "--replicates", "100"]) == 2
    err = capsys.readouterr().err
    assert err == f"sloguard report: {bad}:{first_request() + 1}: {problem}\n"


def test_memory_per_request_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    recs = list(records())
    request = next(r for r in recs if r["type"] == "request")
    n = 10_000
    with path.open("w") as fh:
        fh.write(json.dumps(recs[0]) + "\n")
        for i in range(n):
            fh.write(json.dumps({**request, "seq": i}) + "\n")
    tracemalloc.start()
    side = read_bench(str(path), "baseline")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert side.count() == n
    assert peak / n < 600, f"{peak / n:.0f} bytes per request"  # a dict per request was ~3,000


def test_report_with_a_config_needs_no_secret_it_never_uses(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    base, cand = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write(str(base), records())
    write(str(cand), records())
    (tmp_path / "token").write_text("xoxb-present-and-scrubbed\n")
    monkeypatch.delenv("MISSING_KEY", raising=False)
    config = tmp_path / "c.yaml"
    config.write_text(f"""version: sloguard/v1
state_dir: {tmp_path / "state"}
targets: [{{name: sim, api_url: "http://127.0.0.1:1", model: m, api_key_file: {tmp_path / "absent.key"}}}]
notifiers:
  - {{name: a, type: slack, token_file: {tmp_path / "token"}, channel: "#x"}}
  - {{name: b, type: alertmanager, url: "http://127.0.0.1:9093", password_env: MISSING_KEY, username: u}}
""")
    out = tmp_path / "r.json"
    assert main(["report", "-c", str(config), "--baseline", str(base), "--candidate", str(cand),
                 "--replicates", "100", "--format", "json", "-o", str(out)]) == 0, capsys.readouterr().err
    assert "xoxb-present-and-scrubbed" not in out.read_text()
