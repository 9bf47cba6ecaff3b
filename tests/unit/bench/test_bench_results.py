"""The results writer: atomic appends, JSON without NaN; the schema accepts what the writer writes."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import jsonschema
import pytest
from helpers import rec

from sloguard.bench.record import to_json
from sloguard.bench.results import ResultsFile, line
from sloguard.bench.schema import SCHEMA_VERSION, schema


def test_lines_have_no_nan() -> None:
    assert json.loads(line({"a": math.nan, "b": [math.inf, 1.0], "c": {"d": -math.inf}})) == \
        {"a": None, "b": [None, 1.0], "c": {"d": None}}


def test_appends_keep_earlier_stages(tmp_path: Path) -> None:
    f = ResultsFile(str(tmp_path / "r.jsonl"))
    f.start({"type": "header"})
    f.append([{"type": "request", "n": 1}, {"type": "stage", "n": 1}])
    f.append([{"type": "stage", "n": 2}])
    rows = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [r["type"] for r in rows] == ["header", "request", "stage", "stage"]
    assert sorted(os.listdir(tmp_path)) == ["r.jsonl"]  # no temporary file left behind


def test_a_failed_append_leaves_the_file_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = ResultsFile(str(tmp_path / "r.jsonl"))
    f.start({"type": "header"})
    before = (tmp_path / "r.jsonl").read_bytes()

    def crash(*_: object) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        f.append([{"type": "stage"}])
    assert (tmp_path / "r.jsonl").read_bytes() == before


def test_request_rows_validate_and_carry_scheduled_latencies() -> None:
    r = rec(4, ttft=0.1, e2e=0.5, scheduled=1.0, sent=1.2)
    row = json.loads(line(to_json(r, {"gp": True}, "rate", 2.0)))
    jsonschema.validate(row, schema())
    assert row["send_lag_s"] == pytest.approx(0.2) and row["ttft_sched_s"] == pytest.approx(0.3)
    assert "itl_counts" not in row and row["good"] == {"gp": True}


def test_schema_rejects_an_unknown_version_and_type() -> None:
    s = schema()
    assert s["$defs"]["header"]["properties"]["schema"] == {"const": SCHEMA_VERSION}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"type": "mystery"}, s)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"type": "end", "status": "complete", "stages": 1}, s)
    jsonschema.validate({"type": "end", "status": "complete", "stages": 1, "exit_code": 0}, s)
