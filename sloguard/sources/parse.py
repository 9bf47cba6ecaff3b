"""Parse Prometheus 0.0.4 and OpenMetrics text into samples, several times faster than prometheus_client.

The parser works line by line with `str.find`/`str.partition` (no per-character loop): label values
without a backslash are sliced out directly; only escaped values take the slow path. It returns the same
(name, labels, value) multiset as `prometheus_client.parser` (the test oracle) and keeps sample names as
written (`_total`, `_bucket`, `_created` ...). Comment lines (HELP, TYPE, UNIT, EOF) carry no samples.

Limits (ParseLimits, as Prometheus's scrape limits) stop the parse at the first sample over a limit, so a
hostile page costs at most `samples` lines of work, never its full size.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sloguard.model import Sample

_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_ESCAPES = {"\\": "\\", "n": "\n", '"': '"'}


class ParseError(ValueError):
    """Malformed exposition text; `line_no` is 1-based."""

    def __init__(self, line_no: int, msg: str) -> None:
        super().__init__(f"line {line_no}: {msg}")
        self.line_no = line_no
        self.msg = msg

    def __reduce__(self) -> tuple[type[ParseError], tuple[int, str]]:
        return type(self), (self.line_no, self.msg)


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """Most samples per page, labels per sample and characters per label value; 0 = no limit."""

    samples: int = 0
    labels: int = 0
    label_value_length: int = 0


class LimitExceeded(ValueError):
    """The page breaks a ParseLimits bound; `reason` is the Prometheus-style limit name (e.g. sample_limit)."""

    def __init__(self, reason: str, msg: str) -> None:
        super().__init__(msg)
        self.reason = reason

    def __reduce__(self) -> tuple[type[LimitExceeded], tuple[str, str]]:
        return type(self), (self.reason, str(self))


_NO_LIMITS = ParseLimits()


def parse_text(text: str, limits: ParseLimits = _NO_LIMITS) -> list[Sample]:
    """Return every sample in `text`; raise ParseError(line_no, msg) on the first malformed line.

    Raise LimitExceeded as soon as a sample breaks `limits` (the rest of the page is not parsed).
    """
    return parse_page(text, limits)[0]


def parse_page(
    text: str, limits: ParseLimits = _NO_LIMITS, keep: tuple[str, ...] | None = None
) -> tuple[list[Sample], int]:
    """Return (samples whose name starts with one of `keep` (all if None), count of all samples).

    Every line is validated and counted against `limits` whether kept or not; only kept ones become
    Sample objects, so a page of unrelated families costs no memory per line.
    """
    ctx = _Context(1.0 if "# EOF" in text else 0.001)
    names, shapes = ctx.names, ctx.shapes
    wanted: dict[str, bool] = {}
    out: list[Sample] = []
    append = out.append
    lines = text.split("\n")
    most = limits.samples if limits.samples and limits.samples < len(lines) else len(lines) + 1
    long_line = limits.label_value_length or len(text) + 1
    count = 0
    for no, line in enumerate(lines, 1):
        if not line or line[0] == "#":
            continue
        if count >= most:
            raise LimitExceeded("sample_limit", f"more than {limits.samples} samples (line {no})")
        if len(line) > long_line or (limits.labels and line.count("=") > limits.labels):
            _check_line(ctx, no, line, limits)
        close = line.rfind("}")
        brace = line.find("{")
        if line[0] in " \t" or line[-1] == "\r" or "\\" in line or " # " in line or brace > close:
            count += _slow(ctx, no, line, keep, append)
            continue
        try:
            if close == -1:
                name, _, rest = line.partition(" ")
                lnames: tuple[str, ...] = ()
                values: list[str] = []
            else:
                name, rest = line[:brace], line[close + 1 :]
                parts = line[brace + 1 : close].split('"')
                shape = tuple(parts[0::2])
                lnames = shapes.get(shape)  # type: ignore[assignment]
                if lnames is None:
                    lnames = shapes[shape] = _names(shape)
                values = parts[1::2]
                if len(values) != len(lnames):
                    raise ValueError("unbalanced quotes")
            if name not in names:
                ctx.check_name(name)
            value, ts = _value(rest, ctx.ts_scale) if "_" in rest or " " in rest.strip() else (float(rest), None)
        except (ValueError, IndexError):
            count += _slow(ctx, no, line, keep, append)
            continue
        count += 1
        ok = wanted.get(name)
        if ok is None:
            ok = wanted[name] = keep is None or name.startswith(keep)
        if ok:  # only kept samples cost a dict and an object
            append(Sample(name, dict(zip(lnames, values, strict=True)), value, ts))
    return out, count


def _slow(ctx: _Context, no: int, line: str, keep: tuple[str, ...] | None,
          append: Callable[[Sample], None]) -> int:
    """Parse a line on the slow path; append it if kept; return how many samples it held (0 or 1)."""
    sample = ctx.slow_or_raise(no, line)
    if sample is None:
        return 0
    if keep is None or sample.name.startswith(keep):
        append(sample)
    return 1


def _check_line(ctx: _Context, no: int, line: str, limits: ParseLimits) -> None:
    """Check one line that may break the label limits (long, or with many '='), on the slow path."""
    try:
        sample = ctx.slow_or_raise(no, line)
    except ParseError:
        return  # the main loop reports the malformed line
    if sample is None:
        return
    if limits.labels and len(sample.labels) > limits.labels:
        raise LimitExceeded("label_limit", f"{sample.name} has {len(sample.labels)} labels, more than "
                                           f"{limits.labels} (line {no})")
    for key, value in sample.labels.items():
        if limits.label_value_length and len(value) > limits.label_value_length:
            raise LimitExceeded("label_value_length_limit", f"{sample.name} label {key[:64]} is {len(value)} "
                                f"characters long, more than {limits.label_value_length} (line {no})")


class _Context:
    """Per-parse caches: validated metric names and label-set shapes (`('le=', ',model=', '')` -> names)."""

    def __init__(self, ts_scale: float) -> None:
        self.ts_scale = ts_scale
        self.names: set[str] = set()
        self.shapes: dict[tuple[str, ...], tuple[str, ...]] = {}

    def check_name(self, name: str) -> None:
        if not _NAME_RE.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        self.names.add(name)

    def slow_or_raise(self, no: int, line: str) -> Sample | None:
        """Parse a line the fast path declined; None for an indented comment or blank line."""
        if not line.strip() or line.strip()[0] == "#":
            return None
        try:
            return self.slow(line)
        except (ValueError, IndexError) as exc:
            raise ParseError(no, f"{exc}: {line[:120]!r}") from None

    def slow(self, line: str) -> Sample:
        """Parse any valid line: escapes, exemplars, tabs, stray whitespace."""
        line = line.strip()
        brace = line.find("{")
        head = line.split(None, 1)
        if brace == -1 or (len(head[0]) < brace and head[0] != line[:brace].rstrip()):
            if len(head) < 2:
                raise ValueError("no value")
            name, rest, labels = head[0], head[1], dict[str, str]()
        else:
            name = line[:brace].rstrip()
            close, labels = _escaped_labels(line, brace + 1)
            rest = line[close + 1 :]
        if name not in self.names:
            self.check_name(name)
        value, ts = _value(rest, self.ts_scale)
        return Sample(name, labels, value, ts)


def _names(shape: tuple[str, ...]) -> tuple[str, ...]:
    """Validate the text around the quoted values of a label set and return its label names."""
    *fragments, tail = shape
    if tail.strip(" ,") or (tail.strip() == "," and not fragments):
        raise ValueError("malformed label set")
    names = []
    for i, fragment in enumerate(fragments):
        k = fragment.strip()
        if i and not k.startswith(","):
            raise ValueError("expected ',' between labels")
        k = k[1:].lstrip() if i else k
        if not k.endswith("="):
            raise ValueError(f"malformed label near {fragment!r}")
        k = k[:-1].rstrip()
        if not _LABEL_RE.match(k):
            raise ValueError(f"invalid label name {k!r}")
        names.append(k)
    if len(set(names)) != len(names):
        raise ValueError("duplicate label name")
    return tuple(names)


def _value(rest: str, ts_scale: float) -> tuple[float, float | None]:
    rest, _, _exemplar = rest.partition(" # ")
    parts = rest.split()
    if not parts or len(parts) > 2:
        raise ValueError("expected a value and an optional timestamp")
    value = _float(parts[0])
    return value, (_float(parts[1]) * ts_scale if len(parts) == 2 else None)


def _float(text: str) -> float:
    if "_" in text:
        raise ValueError(f"invalid number {text!r}")
    return float(text)


def _escaped_labels(line: str, start: int) -> tuple[int, dict[str, str]]:
    """Slow path: label values with backslash escapes (\\\\, \\", \\n; others kept verbatim)."""
    labels: dict[str, str] = {}
    pos, n = start, len(line)
    while True:
        while pos < n and line[pos] in " ,":
            pos += 1
        if pos >= n:
            raise ValueError("unterminated label set")
        if line[pos] == "}":
            return pos, labels
        eq = line.find("=", pos)
        if eq == -1:
            raise ValueError("label without '='")
        lname = line[pos:eq].strip()
        q = eq + 1
        while q < n and line[q] == " ":
            q += 1
        if q >= n or line[q] != '"':
            raise ValueError(f"label {lname!r} value is not quoted")
        value, pos = _unescape(line, q + 1)
        _add_label(labels, lname, value)
        if pos < n and line[pos] not in " ,}":
            raise ValueError("expected ',' between labels")


def _add_label(labels: dict[str, str], name: str, value: str) -> None:
    if not _LABEL_RE.match(name):
        raise ValueError(f"invalid label name {name!r}")
    if name in labels:
        raise ValueError(f"duplicate label {name!r}")
    labels[name] = value


def _unescape(line: str, pos: int) -> tuple[str, int]:
    """Return (unescaped value, index after the closing quote) for a value starting at `pos`."""
    chunks: list[str] = []
    while True:
        quote = line.find('"', pos)
        slash = line.find("\\", pos)
        if quote == -1:
            raise ValueError("unterminated label value")
        if slash == -1 or quote < slash:
            chunks.append(line[pos:quote])
            return "".join(chunks), quote + 1
        chunks.append(line[pos:slash])
        nxt = line[slash + 1 : slash + 2]
        chunks.append(_ESCAPES.get(nxt, "\\" + nxt))
        pos = slash + 2
