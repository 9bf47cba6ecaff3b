"""`sloguard inspect-metrics` on a page that is not an engine's, or with the wrong --engine: exit 1 and say why."""

from __future__ import annotations

from pathlib import Path

import pytest

from sloguard.sources.inspect import main

VLLM = Path(__file__).resolve().parents[2] / "fixtures" / "metrics" / "captured" / "vllm-v1-dynamo-2026-01.txt"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_prometheus_page_of_no_engine_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "node.prom"
    page.write_text('# TYPE node_cpu_seconds_total counter\nnode_cpu_seconds_total{cpu="0",mode="idle"} 12\n')
    rc, out, err = _run([str(page)], capsys)
    assert rc == 1 and out == ""
    assert f"{page}: no inference-engine metrics recognised (1 sample(s), e.g. node_cpu_seconds_total)" in err
    assert "--raw" in err and len(err.strip().splitlines()) == 1


def test_the_wrong_engine_names_the_detected_one(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run([str(VLLM), "--engine", "tgi"], capsys)
    assert rc == 1 and out == ""
    assert "no tgi metrics found" in err and "it looks like vllm: use --engine vllm or auto" in err


def test_the_right_engine_still_prints_the_view(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run([str(VLLM), "--engine", "vllm"], capsys)
    assert rc == 0 and out.startswith("engine: vllm")
