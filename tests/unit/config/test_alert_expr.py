"""The PromQL subset: what parses, what it selects, and where errors point."""

from __future__ import annotations

import pytest

from sloguard.config.expr import ExprError, parse_expr


@pytest.mark.parametrize(("text", "metric", "ops", "op", "threshold"), [
    ("up == 0", "up", [], "==", 0.0),
    ('sloguard_source_up{source="nvml"} == 0', "sloguard_source_up", ["="], "==", 0.0),
    ("m{a='x', b!=\"y\", c=~\"z.*\", d!~'w|v',} >= 1.5e3", "m", ["=", "!=", "=~", "!~"], ">=", 1500.0),
    ("  m  {  }  <  -2  ", "m", [], "<", -2.0),
    ("ns:rec:rate5m != .5", "ns:rec:rate5m", [], "!=", 0.5),
    ("m <= +Inf", "m", [], "<=", float("inf")),
])
def test_parse_valid(text: str, metric: str, ops: list[str], op: str, threshold: float) -> None:
    e = parse_expr(text)
    assert (e.metric, [m.op for m in e.matchers], e.op, e.threshold) == (metric, ops, op, threshold)


@pytest.mark.parametrize(("text", "col", "fragment"), [
    ("", 1, "metric name"),
    ("1 > 2", 1, "metric name"),
    ("m", 2, "comparison"),
    ("m > ", 5, "number"),
    ("m{a=1} > 2", 5, "quoted label value"),
    ('m{a~"x"} > 2', 4, "one of"),
    ('m{a="x" b="y"} > 2', 9, "',' or '}'"),
    ('m{a=~"("} > 2', 6, "regular expression"),
    ("rate(m[5m]) > 1", 5, "comparison"),
    ("m > 1 and n > 2", 7, "only `metric"),
    ('m{a="x"', 8, "',' or '}'"),
])
def test_parse_errors_name_the_column(text: str, col: int, fragment: str) -> None:
    with pytest.raises(ExprError) as info:
        parse_expr(text)
    assert info.value.position == col
    assert str(info.value).startswith(f"col {col}: ")
    assert fragment in str(info.value)


@pytest.mark.parametrize(("labels", "value", "expected"), [
    ({"a": "x", "b": "q", "c": "zz", "d": "u"}, 2.0, True),
    ({"a": "x", "b": "y", "c": "zz", "d": "u"}, 2.0, False),   # b != y fails
    ({"a": "x", "b": "q", "c": "yz", "d": "u"}, 2.0, False),   # c=~ is anchored
    ({"a": "x", "b": "q", "c": "z", "d": "w"}, 2.0, False),    # d !~ w|v fails
    ({"a": "x", "b": "q", "c": "z", "d": "u"}, 1.0, False),    # value not > 1
    ({"b": "q", "c": "z", "d": "u"}, 2.0, False),              # missing label reads as ""
])
def test_selects_and_holds(labels: dict[str, str], value: float, expected: bool) -> None:
    e = parse_expr('m{a="x", b!="y", c=~"z+", d!~"w|v"} > 1')
    assert (e.selects("m", labels) and e.holds(value)) is expected


def test_promql_round_trips() -> None:
    e = parse_expr('m{a="q\\"x", b=~"a|b"} >= 2')
    assert parse_expr(e.promql()) == e
