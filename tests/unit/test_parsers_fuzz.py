"""Hypothesis fuzzing of every parser that reads peer bytes or user files: each answers any input with a value or
its own one-line error, never another exception. Bounded example counts keep this file to a few seconds."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sloguard.config.load import ConfigError, load_config_text
from sloguard.probes.events import safe_decode
from sloguard.probes.openai import decode_chat
from sloguard.probes.sse import LineTooLong, SSESplitter
from sloguard.reports.bench import read_bench
from sloguard.reports.data import DataError
from sloguard.sim.benchfile import closed_run
from sloguard.slo.cli import read_results
from sloguard.sources.parse import LimitExceeded, ParseError, ParseLimits, parse_page

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
SSE_BITS = st.sampled_from([b"data: ", b"data:", b"event: x", b": c", b"\n", b"\r\n", b"\r", b"{", b"}", b"[DONE]",
                            b'"usage":{"completion_tokens":', b"9223372036854775808", b"NaN", b"-1", b"\xff\xfe",
                            b'{"choices":[{"delta":{"content":"x"}}]}', b"\x1b[2J", "\u2028".encode()])


@FUZZ
@given(st.lists(st.one_of(SSE_BITS, st.binary(max_size=30)), max_size=40), st.data())
def test_sse_splitting_is_the_same_however_the_reads_fall(parts: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    whole, pieces = SSESplitter(max_line=4096), SSESplitter(max_line=4096)
    try:
        expected = [(e.data, e.event) for e in whole.feed(stream, 1)]
    except LineTooLong:
        return
    got = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got += [(e.data, e.event) for e in pieces.feed(stream[a:b], 1)]
    assert got == expected
    for data_text, _ in got:
        chunk = safe_decode(decode_chat, data_text)  # any event: a chunk, a malformed or an invalid answer
        assert chunk.output_tokens is None or 0 <= chunk.output_tokens <= 100_000_000


PROM_BITS = st.sampled_from(['vllm:num_requests_running{model_name="m"} 1\n', "# TYPE x gauge\n", "# HELP x h\n",
                             'x{a="\\n\\"\\\\"} NaN\n', "x +Inf 123\n", "x{", "}", "=", '"', "\n", " ", "1e999",
                             'x{le="0.1"} 3\n', "x_bucket{le=\"+Inf\"} 1\n", "\x1b", "\u2028", "x 1 2 3\n"])


@FUZZ
@given(st.lists(st.one_of(PROM_BITS, st.text(max_size=20)), max_size=40))
def test_prometheus_text_parser_answers_samples_or_its_own_error(parts: list[str]) -> None:
    try:
        samples, count = parse_page("".join(parts), ParseLimits(samples=50, labels=8, label_value_length=64))
    except (ParseError, LimitExceeded):
        return
    assert count >= len(samples) and count <= 50


YAML_BITS = st.sampled_from([
    "version: sloguard/v1\n", "targets:\n", "  - {name: t, api_url: 'http://x'}\n", "a: &a [1, 2]\n", "b: [*a, *a]\n",
    "c: *a\n", "<<: *a\n", "&x ", "*x", "!!python/object:os.system\n", "{", "[", "'", '"', "\t", "- ", ": ", "\x07",
    "slos: [{name: s}]\n", "%YAML 1.1\n", "---\n"])


@FUZZ
@given(st.lists(st.one_of(YAML_BITS, st.text(max_size=15)), max_size=30))
def test_config_loader_answers_a_config_or_config_error(parts: list[str]) -> None:
    try:
        load_config_text("".join(parts), "fuzz.yaml")
    except ConfigError as exc:
        assert all(len(e) < 2000 for e in exc.errors)


ROW = {"ts": 1.8e9, "probe": "p", "target": "t", "model": "m", "api": "chat", "ok": True, "ttft_s": 0.1}
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                   st.text(max_size=10), st.lists(st.integers(), max_size=3))


@FUZZ
@given(st.dictionaries(st.sampled_from([*ROW, "e2e_s", "output_tokens", "itl_counts", "status_code", "error"]),
                       VALUES, max_size=6), st.sampled_from(["", "NaN", "}", "\x00"]))
def test_results_reader_answers_results_or_a_line_error(changes: dict[str, object], tail: str) -> None:
    line = json.dumps({**ROW, **changes}) + tail
    try:
        results = list(read_results([line], "r.jsonl"))
    except ValueError as exc:
        assert str(exc).startswith("r.jsonl:1: ")
        return
    r = results[0]
    assert all(v is None or isinstance(v, str | bool | tuple) or 0 <= v < 2**63 for v in vars_of(r))


def vars_of(r: object) -> list[object]:
    return [getattr(r, f) for f in r.__dataclass_fields__]  # type: ignore[attr-defined]


BENCH = closed_run(5, [1], 3, background_rps=0.0)


@FUZZ
@given(st.integers(1, len(BENCH) - 2), st.sampled_from(["ttft_s", "e2e_s", "ok", "stage", "prompt_bucket",
                                                        "load_kind", "error", "type", "ts"]), VALUES)
def test_bench_reader_answers_a_side_or_a_line_error(tmp_path_factory: object, index: int, key: str,
                                                     value: object) -> None:
    path = Path(str(tmp_path_factory.mktemp("b"))) / "b.jsonl"  # type: ignore[attr-defined]
    recs = [dict(r) for r in BENCH]
    recs[index][key] = value
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    try:
        side = read_bench(str(path), "baseline")
    except DataError as exc:
        assert str(exc).startswith(f"{path}:"), exc
        return
    assert side.requests is not None
