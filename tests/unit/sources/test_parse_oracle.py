"""The parser against prometheus_client's (the oracle): same samples on every fixture and on generated text."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metrics_fixtures import SHARED, exposition_files
from prometheus_client.parser import text_string_to_metric_families

from sloguard.sources.parse import ParseError, parse_text

Key = tuple[str, tuple[tuple[str, str], ...], str]


def _key(name: str, labels: dict[str, str], value: float) -> Key:
    return name, tuple(sorted(labels.items())), "NaN" if math.isnan(value) else repr(float(value))


def ours(text: str) -> list[Key]:
    return sorted(_key(s.name, dict(s.labels), s.value) for s in parse_text(text))


def oracle(text: str, written: set[str]) -> list[Key]:
    """prometheus_client appends `_total` to counters written without it; undo that to compare names as written."""
    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            name = s.name
            if name not in written and name.endswith("_total") and name[:-6] in written:
                name = name[:-6]
            out.append(_key(name, s.labels, s.value))
    return sorted(out)


def test_shared_fixtures_are_present() -> None:
    assert len(list(SHARED.glob("*.txt"))) >= 5, f"shared fixtures missing under {SHARED}"


@pytest.mark.parametrize("path", exposition_files(), ids=lambda p: p.name)
def test_fixture_matches_oracle(path: Path) -> None:
    text = path.read_text()
    got = ours(text)
    assert got, "no samples parsed"
    assert got == oracle(text, {k[0] for k in got})


_name = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True).filter(
    lambda n: not n.endswith(("_total", "_created", "_sum", "_count", "_bucket", "_info", "_gcount", "_gsum"))
)
_lname = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,8}", fullmatch=True).filter(lambda n: n not in ("le", "quantile"))
_lvalue = st.text(alphabet=st.sampled_from(list('ab c,={}"\\\n#é:/')), max_size=8)
_value = st.one_of(st.floats(allow_nan=True), st.sampled_from([0.0, 1.0, -2.5, 1e-9, 1e21]))


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


@st.composite
def expositions(draw: st.DrawFn) -> str:
    lines: list[str] = []
    used: set[str] = set()
    for name in draw(st.lists(_name, min_size=1, max_size=5, unique=True)):
        if any(name.startswith(u) or u.startswith(name) for u in used):
            continue
        used.add(name)
        kind = draw(st.sampled_from(["gauge", "untyped", "counter-created"]))
        lines += [f"# HELP {name} some help", f"# TYPE {name} {'gauge' if kind != 'untyped' else 'untyped'}"]
        for _ in range(draw(st.integers(1, 3))):
            labels = draw(st.dictionaries(_lname, _lvalue, max_size=3))
            body = ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items())
            ts = f" {draw(st.integers(0, 2**40))}" if draw(st.booleans()) else ""
            lines.append(f"{name}{{{body}}} {_num(draw(_value))}{ts}" if labels else f"{name} {_num(draw(_value))}{ts}")
        if kind == "counter-created":
            lines += [f"# TYPE {name}_created gauge", f"{name}_created 1.7e9"]
        if draw(st.booleans()):
            lines.append("# a comment")
    text = "\n".join(lines)
    return text if draw(st.booleans()) else text + "\n"


@settings(max_examples=150, deadline=None)
@given(expositions())
def test_generated_expositions_match_oracle(text: str) -> None:
    got = ours(text)
    assert got == oracle(text, {k[0] for k in got})


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_garbage_raises_only_parse_error(text: str) -> None:
    try:
        parse_text(text)
    except ParseError as exc:
        assert exc.line_no >= 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('a{b="c"} 1', [("a", {"b": "c"}, 1.0)]),
        ('a{ b = "c" , d="e",} 2', [("a", {"b": "c", "d": "e"}, 2.0)]),
        ('a{b="x}y{z"} 3 1700000000000', [("a", {"b": "x}y{z"}, 3.0)]),
        ('a{b="q\\"\\\\\\n"} 4', [("a", {"b": 'q"\\\n'}, 4.0)]),
        ('a{b="\\t"} 5', [("a", {"b": "\\t"}, 5.0)]),
        ("vllm:x_total 6\r\n", [("vllm:x_total", {}, 6.0)]),
        ("a\t7", [("a", {}, 7.0)]),
        ('a 8 # {trace_id="1"} 1.0 1.5\n# EOF', [("a", {}, 8.0)]),
        ('a {b="c"} 9', [("a", {"b": "c"}, 9.0)]),
        ("a +Inf\nb -Inf", [("a", {}, math.inf), ("b", {}, -math.inf)]),
        ("   # indented comment\n\n", []),
    ],
)
def test_parse_cases(text: str, expected: list[tuple[str, dict[str, str], float]]) -> None:
    assert [(s.name, dict(s.labels), s.value) for s in parse_text(text)] == expected


def test_timestamps_follow_the_format() -> None:
    assert parse_text("a 1 1500")[0].timestamp == 1.5  # 0.0.4: milliseconds
    assert parse_text("a 1 1.5\n# EOF\n")[0].timestamp == 1.5  # OpenMetrics: seconds


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a", 1),
        ("ok 1\na{b=\"c\"", 2),
        ('a{b=c} 1', 1),
        ("<html><body>502</body></html>", 1),
        ('{"error": "not found"}', 1),
        ('"a 1\\n"', 1),
        ("a 1 2 3", 1),
        ('a{b="1"c="2"} 1', 1),
        ('a{b="1",b="2"} 1', 1),
        ("a 1_0", 1),
        ("1a 1", 1),
        ('a{1b="x"} 1', 1),
        ("a{b=\"c\"} one", 1),
    ],
)
def test_malformed_lines_raise_parse_error(text: str, line: int) -> None:
    with pytest.raises(ParseError) as info:
        parse_text(text)
    assert info.value.line_no == line
