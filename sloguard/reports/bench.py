"""Read a `sloguard bench -o FILE` results file (schema sloguard.bench.schema, `sloguard.bench/v1`) into a Side.

The one adapter between the bench's results format and reports; the format itself (record types, their
required fields, the version) is the bench's own (`sloguard.bench.schema`), never restated here. The bench
writes no warm-up requests; requests of other behaviours than `normal` are left out (counted in
`excluded`). Open-loop stages use the latencies from the scheduled send time (`*_sched_s`: no coordinated
omission), as the bench judges them. Two files compare when their headers' `workload_digest` match;
otherwise the differing workload/load fields are named (bench_differences).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from sloguard import untrusted
from sloguard.bench.header import PER_RUN, digest
from sloguard.bench.schema import RECORDS, SCHEMA_VERSION
from sloguard.config.files import shown
from sloguard.reports import columns
from sloguard.reports.columns import RequestColumns
from sloguard.reports.data import DataError, LoadStage, Side
from sloguard.untrusted import Invalid

# Digest fields a report handles itself (per load level, its own sample sizes): a difference only warns.
NEEDS_CONFIG = "objectives and goodput are judged only with -c FILE"
WARN_FIELDS = ("load.mode", "load.levels", "load.search", "load.duration_s", "load.requests")


MAX_LINE_BYTES = 1024 * 1024  # one record; a request record is ~1 KiB, a header a few


def _parse(path: str, i: int, raw: bytes, last: bool, first: bool = False) -> dict[str, Any]:
    """Return one line's record, its type known and its required fields present; DataError naming the line."""
    try:
        rec = untrusted.json_doc(raw, what="line")
    except Invalid:
        cut = last and raw.lstrip().startswith(b"{") and not raw.endswith(b"\n")
        raise DataError(f"{path}:{i}: " + ("the last line is cut off (truncated file?)" if cut else
                                           "not JSON (one JSON object per line; no NaN or Infinity)")) from None
    kind = rec.get("type") if isinstance(rec, dict) else None
    if not isinstance(kind, str) or kind not in RECORDS:
        raise DataError(f"{path}:{i}: not a results record (type {shown(kind)}; {SCHEMA_VERSION} has "
                        f"{sorted(RECORDS)})")
    # a header's fields are checked at the end; a first record that is no header is named as such
    return dict(rec) if kind == "header" or first else _known(path, i, dict(rec))


def _lines(path: str) -> Iterator[tuple[int, bytes, bool]]:
    """Yield (line number, bytes, is last) of the non-blank lines, each at most MAX_LINE_BYTES; DataError else."""
    try:
        fh = Path(path).open("rb")  # noqa: SIM115 (closed below; opened here so each error names the path)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with fh:
        i, line = 0, fh.readline(MAX_LINE_BYTES + 1)
        while line:
            i += 1
            if len(line) > MAX_LINE_BYTES:
                raise DataError(f"{path}:{i}: line longer than {MAX_LINE_BYTES} bytes (not a results record)")
            following = fh.readline(MAX_LINE_BYTES + 1)
            if line.strip():
                yield i, line, not following
            line = following


class _Reader:
    """The records of one results file, read in order: requests into columns, the few others kept."""

    def __init__(self, path: str) -> None:
        self.path, self.columns = path, RequestColumns()
        self.head: dict[str, Any] | None = None
        self.others: list[dict[str, Any]] = []  # stage, search and end records
        self.excluded = 0

    def line(self, i: int, raw: bytes, last: bool) -> None:
        """Read one line: a request straight into the columns (the fast path), anything else as a record."""
        if self.head is None:  # the first record must be the header, whatever else is wrong with it
            self.add(i, _parse(self.path, i, raw, last, first=True))
            return
        try:
            row = columns.decode(raw)
        except (msgspec.DecodeError, Invalid) as exc:
            rec = _parse(self.path, i, raw, last)
            if rec["type"] == "request" and isinstance(exc, Invalid):
                raise DataError(f"{self.path}:{i}: {exc}") from None
            self.add(i, rec)
            return
        if row.type != "request":
            self.add(i, _parse(self.path, i, raw, last))
        else:
            self.request(i, row)

    def add(self, i: int, rec: dict[str, Any]) -> None:
        """Read one record already parsed (known type, required fields present)."""
        if self.head is None:
            self.head = _header(self.path, rec)
        elif rec["type"] == "request":
            try:
                row = columns.convert(rec)
            except Invalid as exc:
                raise DataError(f"{self.path}:{i}: {exc}") from None
            self.request(i, row)
        elif rec["type"] != "header":
            try:
                self.others.append(_checked_other(rec))
            except Invalid as exc:
                raise DataError(f"{self.path}:{i}: {exc}") from None

    def request(self, i: int, row: columns.RequestRow) -> None:
        if self.head is None:
            raise DataError(f"{self.path}:{i}: the first record is 'request', not the header: not a bench results "
                            "file")
        if row.behaviour != "normal":
            self.excluded += 1
            return
        try:
            self.columns.add(row)
        except Invalid as exc:
            raise DataError(f"{self.path}:{i}: {exc}") from None


def _checked_other(rec: dict[str, Any]) -> dict[str, Any]:
    """Check the fields of a stage, search or end record that the report reads."""
    if rec["type"] == "stage":
        untrusted.count(rec["stage"], hi=1_000_000, what="stage")
        untrusted.number(rec["load"], lo=0.0, hi=1e9, what="load")
        untrusted.optional(untrusted.number, rec.get("rps"), hi=1e9, what="rps")
        untrusted.count((rec.get("warmup") or {}).get("requests", 0), what="warmup.requests")
    return rec


def _header(path: str, head: dict[str, Any]) -> dict[str, Any]:
    if head.get("type") != "header":
        raise DataError(f"{path}:1: the first record is {shown(head.get('type'))}, not the header: not a bench "
                        "results file")
    if head.get("schema") != SCHEMA_VERSION:
        raise DataError(f"{path}:1: schema {shown(head.get('schema'))}; this sloguard reads {SCHEMA_VERSION!r}")
    return head


def _stages(records: list[dict[str, Any]]) -> tuple[LoadStage, ...]:
    """Return the load levels; a level measured again (a search's confirmation) keeps its last summary."""
    by_index = {int(r["stage"]): r for r in records if r["type"] == "stage"}
    return tuple(LoadStage(i, str(r["load_kind"]), float(r["load"]), None if r.get("rps") is None else float(r["rps"]),
                           str(r.get("status", "complete"))) for i, r in sorted(by_index.items()))


def _environment(head: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    gpu = next((r["gpu"] for r in records if r["type"] == "stage" and r.get("gpu")), None)
    machine = head.get("machine") or {}
    return {"sloguard_version": head.get("sloguard_version"), "created": head.get("created"),
            "config_sha256": (head.get("config") or {}).get("sha256"), "client_cpus": machine.get("cpus"),
            "client_load_average": machine.get("loadavg"), "gpu": gpu}


def _max_load(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Return a search's result as reports show it: value, kind, interval, why the search stopped."""
    s = next((r for r in records if r["type"] == "search"), None)
    if s is None:
        return None
    return {"value": s.get("max_load"), "kind": s.get("kind"), "interval": [s.get("low"), s.get("high")],
            "reason": s.get("stopped"), "first_break": s.get("first_break"), "breaks_first": s.get("breaks_first")}


def workload_of(head: Mapping[str, Any]) -> dict[str, Any]:
    """Return the run's workload identity: its digest and the workload/load fields it covers, flattened."""
    out: dict[str, Any] = {"workload_digest": head.get("workload_digest")}
    for part in ("workload", "load"):
        out.update({f"{part}.{k}": v for k, v in (head.get(part) or {}).items() if k not in PER_RUN})
    return out


def bench_differences(base: Mapping[str, Any], cand: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Return (refused, warned) 'field: baseline X, candidate Y' lines of two runs' workload identities."""
    refused: list[str] = []
    warned: list[str] = []
    for key in sorted((set(base) | set(cand)) - {"workload_digest"}):
        if base.get(key) != cand.get(key):
            line = f"{key}: baseline {_show(base.get(key))}, candidate {_show(cand.get(key))}"
            (warned if key in WARN_FIELDS else refused).append(line)
    if not refused and not warned and base.get("workload_digest") != cand.get("workload_digest"):
        refused.append(f"workload_digest: baseline {base.get('workload_digest')}, candidate "
                       f"{cand.get('workload_digest')} (the headers were edited?)")
    return refused, warned


def _show(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(v, list) and len(v) == 2 for v in value):
        return "{" + ", ".join(f"{a}: {b:g}" if isinstance(b, int | float) else f"{a}: {b}" for a, b in value) + "}"
    return "none" if value is None else str(value)


def _config_slos(path: str, head: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """Return the SLOs the run was judged by, from its config file where it is still there unchanged
    (as given, or beside the results file), else ([], why not)."""
    from sloguard.bench.header import sha256_file
    from sloguard.config.load import ConfigError, load_config
    from sloguard.reports.slos import slo_json
    from sloguard.slo.model import slos_from_config

    conf = head.get("config") or {}
    given = Path(str(conf.get("path") or ""))
    names = {str(s.get("name")) for s in head.get("slos") or []}
    for cand in (given, Path(path).parent / given.name):
        try:
            if not given.name or not cand.is_file() or sha256_file(str(cand)) != conf.get("sha256"):
                continue
            cfg = load_config(cand)
        except (OSError, ConfigError):
            continue
        target = (head.get("target") or {}).get("name")
        return [slo_json(x) for x in slos_from_config(cfg) if x.target == target and x.name in names], None
    return [], f"{path}: the bench's config {given} is not here unchanged (sha256): {NEEDS_CONFIG}"


def read_bench(path: str, role: str) -> Side:
    """Return the Side a results file describes, read line by line in bounded memory; DataError (naming
    `FILE:LINE: field: problem`) for anything that cannot be compared."""
    reader = _Reader(path)
    for i, raw, last in _lines(path):
        reader.line(i, raw, last)
    if reader.head is None:
        raise DataError(f"{path}: empty file (not a sloguard bench results file)")
    return _side(reader, role)


def side_from_records(records: list[dict[str, Any]], role: str, path: str) -> Side:
    """Return the Side of a results file's records already in memory (`path` names it in messages)."""
    reader = _Reader(path)
    for i, rec in enumerate(records, 1):
        reader.add(i, rec if i == 1 and rec.get("type") == "header" else _known(path, i, rec))
    if reader.head is None:
        raise DataError(f"{path}: empty file (not a sloguard bench results file)")
    return _side(reader, role)


def _known(path: str, i: int, rec: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(rec.get("type"), str) or rec["type"] not in RECORDS:
        raise DataError(f"{path}:{i}: not a results record (type {shown(rec.get('type'))})")
    missing = [k for k in RECORDS[rec["type"]]["required"] if k not in rec]
    if missing:
        raise DataError(f"{path}:{i}: {rec['type']} record lacks {', '.join(missing)} ({SCHEMA_VERSION})")
    return rec


def _side(reader: _Reader, role: str) -> Side:
    path, head, records = reader.path, _known(reader.path, 1, reader.head or {}), reader.others
    stages = _stages(records)
    requests = reader.columns.requests()
    target = head.get("target") or {}
    slos, why_not = _config_slos(path, head) if head.get("slos") else ([], None)
    ts = requests.ts[~np.isnan(requests.ts)]
    side = Side(role=role, kind="bench", spec=path, requests=requests, stages=stages, max_load=_max_load(records),
                identity={"target": target.get("name"), "engine": target.get("engine"),
                          "engine_version": target.get("engine_version"), "model": target.get("model"),
                          "labels": dict(head.get("labels") or {})},
                environment=_environment(head, records), workload=workload_of(head),
                slos=slos, time_range=(float(ts.min()) if ts.size else None, float(ts.max()) if ts.size else None),
                excluded={"other behaviour": reader.excluded} if reader.excluded else {})
    if head.get("workload_digest") != digest(head.get("workload") or {}, head.get("load") or {}):
        side.notes.append(f"{path}: workload_digest does not match the header's workload and load (edited?): "
                          "the fields themselves are compared")
    warm = sum(int((r.get("warmup") or {}).get("requests", 0)) for r in records if r["type"] == "stage")
    if warm:
        side.excluded["warm-up (not in the file)"] = warm
    if why_not:
        side.notes.append(why_not)
    if not any(r["type"] == "end" for r in records):
        side.notes.append(f"{path}: the run did not finish (no end record); {len(stages)} complete stage(s) read")
    return side
