"""`sloguard inspect-metrics`: JSON view, raw samples, errors as exit code 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from metrics_fixtures import OWN, SHARED

from sloguard.sources.inspect import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_json_view(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run([str(SHARED / "vllm-v1-dynamo-2026-01.txt"), "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and data["engine"] == "vllm"
    ttft = data["models"]["Qwen/Qwen3-0.6B"]["histograms"]["ttft"]
    assert ttft["buckets"][-1] == ["+Inf", 2.0] and ttft["count"] == 2.0
    assert data["models"]["Qwen/Qwen3-0.6B"]["finished_by_reason"]["length"] == 2.0


def test_engine_flag_and_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run([str(OWN / "tgi-3.x-docs.txt"), "--engine", "tgi"], capsys)
    assert rc == 0 and out.startswith("engine: tgi") and "queue" in out


def test_raw_samples(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run([str(SHARED / "triton-core-datadog.txt"), "--raw", "--json"], capsys)
    raw = json.loads(out)
    assert rc == 0 and len(raw) == 377
    assert set(raw[0]) == {"name", "labels", "value"}


def test_unreadable_input_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "page.html"
    bad.write_text("<html>oops</html>")
    rc, _, err = run([str(bad)], capsys)
    assert rc == 1 and "not_metrics" in err
    rc, _, err = run([str(tmp_path / "missing.txt")], capsys)
    assert rc == 1 and "connect" in err


def test_signals_list_what_fed_each_and_what_is_not_available(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run([str(OWN / "triton-trtllm-23.x-blocks.txt")], capsys)
    assert rc == 0
    section = out.split("model:", 1)[0].splitlines()
    lines = {ln.split()[0]: ln for ln in section if ln.startswith("  ")}
    assert "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"used\"} / " in lines["kv_cache_usage_ratio"]
    assert lines["ttft_seconds"].endswith("not available")
    assert "(a mean per window, no quantiles)" in lines["e2e_seconds"]
    rc, out, _ = run([str(OWN / "llamacpp-pypi-0.3.36-server.txt"), "--json"], capsys)
    signals = json.loads(out)["signals"]
    assert signals["kv_cache_usage_ratio"] == {
        "available": False, "fed_by": [],
        "note": "newer llama-server builds dropped it and expose no capacity to derive it from"}
    assert signals["generation_tokens_per_second"]["fed_by"] == ["llamacpp:tokens_predicted"]
