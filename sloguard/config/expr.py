"""The PromQL subset of threshold alerts: `metric{l="v", l!="v", l=~"re", l!~"re"} OP number`."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_MATCH_OP = re.compile(r"=~|!~|!=|=")
_CMP_OP = re.compile(r">=|<=|==|!=|>|<")
_NUMBER = re.compile(r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|Inf|NaN)")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"|\'((?:[^\'\\\n]|\\.)*)\'')
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}

COMPARATORS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
}


class ExprError(ValueError):
    """An expression outside the subset; `position` is the 1-based column of the problem."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"col {position}: {message}")
        self.position = position


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher; regexes are fully anchored as in PromQL."""

    label: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Return whether a label set passes; a missing label reads as ""."""
        actual = labels.get(self.label, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        hit = re.fullmatch(self.value, actual) is not None
        return hit if self.op == "=~" else not hit

    def promql(self) -> str:
        """Return the matcher as PromQL text."""
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.label}{self.op}"{escaped}"'


@dataclass(frozen=True, slots=True)
class Expr:
    """A parsed threshold expression."""

    metric: str
    matchers: tuple[Matcher, ...]
    op: str
    threshold: float

    def selects(self, name: str, labels: Mapping[str, str]) -> bool:
        """Return whether a series is selected by the metric name and every matcher."""
        return name == self.metric and all(m.matches(labels) for m in self.matchers)

    def holds(self, value: float) -> bool:
        """Return whether a selected series' value passes the comparison."""
        return COMPARATORS[self.op](value, self.threshold)

    def promql(self) -> str:
        """Return canonical PromQL text for the expression."""
        inner = ", ".join(m.promql() for m in self.matchers)
        return f"{self.metric}{{{inner}}} {self.op} {self.threshold:g}"


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def take(self, pattern: re.Pattern[str], what: str) -> re.Match[str]:
        self.skip()
        m = pattern.match(self.text, self.pos)
        if m is None:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of expression"
            raise ExprError(f"expected {what}, found {found}", self.pos + 1)
        self.pos = m.end()
        return m

    def peek(self, char: str) -> bool:
        self.skip()
        return self.text.startswith(char, self.pos)


def _unescape(raw: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), raw)


def _matcher(sc: _Scanner) -> Matcher:
    label = sc.take(_LABEL, "a label name").group(0)
    op = sc.take(_MATCH_OP, "one of = != =~ !~").group(0)
    sc.skip()
    at = sc.pos + 1
    m = sc.take(_STRING, "a quoted label value")
    value = _unescape(m.group(1) if m.group(1) is not None else m.group(2))
    if op in ("=~", "!~"):
        try:
            re.compile(value)
        except re.error as exc:
            raise ExprError(f"invalid regular expression: {exc.msg}", at) from None
    return Matcher(label, op, value)


def _matchers(sc: _Scanner) -> tuple[Matcher, ...]:
    if not sc.peek("{"):
        return ()
    sc.pos += 1
    out: list[Matcher] = []
    while not sc.peek("}"):
        out.append(_matcher(sc))
        if sc.peek(","):
            sc.pos += 1
        elif not sc.peek("}"):
            sc.take(re.compile(r"[,}]"), "',' or '}'")
    sc.pos += 1
    return tuple(out)


def parse_expr(text: str) -> Expr:
    """Parse `metric{matchers} OP number`; raise ExprError naming the 1-based column of the first problem."""
    sc = _Scanner(text)
    metric = sc.take(_NAME, "a metric name").group(0)
    matchers = _matchers(sc)
    op = sc.take(_CMP_OP, "a comparison (> < >= <= == !=)").group(0)
    threshold = float(sc.take(_NUMBER, "a number").group(0))
    sc.skip()
    if sc.pos < len(text):
        raise ExprError(f"unexpected {text[sc.pos:sc.pos + 12]!r}: only `metric{{...}} OP number` is supported",
                        sc.pos + 1)
    return Expr(metric, matchers, op, threshold)


def parse_selector(text: str) -> tuple[str, tuple[Matcher, ...]]:
    """Parse `metric{matchers}` alone; raise ExprError on anything else."""
    sc = _Scanner(text)
    metric = sc.take(_NAME, "a metric name").group(0)
    matchers = _matchers(sc)
    sc.skip()
    if sc.pos < len(text):
        raise ExprError(f"unexpected {text[sc.pos:sc.pos + 12]!r} after the selector", sc.pos + 1)
    return metric, matchers
