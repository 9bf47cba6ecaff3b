"""Read a `sloguard bench -o FILE` results file (schema sloguard.bench.schema, `sloguard.bench/v1`) into a Side.

The one adapter between the bench's results format and reports; the format itself (record types, their
required fields, the version) is the bench's own (`sloguard.bench.schema`), never restated here. The bench
writes no warm-up requests; requests of other behaviours than `normal` are left out (counted in
`excluded`). Open-loop stages use the latencies from the scheduled send time (`*_sched_s`: no coordinated
omission), as the bench judges them. Two files compare when their headers' `workload_digest` match;
otherwise the differing workload/load fields are named (bench_differences).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sloguard.bench.header import digest
from sloguard.bench.schema import RECORDS, SCHEMA_VERSION
from sloguard.reports.data import DataError, LoadStage, Side, build_requests, outcome_of

# Digest fields a report handles itself (per load level, its own sample sizes): a difference only warns.
NEEDS_CONFIG = "objectives and goodput are judged only with -c FILE"
WARN_FIELDS = ("load.mode", "load.levels", "load.search", "load.duration_s", "load.requests")


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _parse(path: str, text: str, i: int, ln: str, last: int) -> dict[str, Any]:
    try:
        rec = json.loads(ln, parse_constant=_reject_constant)
    except ValueError as exc:
        cut = i == last and ln.lstrip().startswith("{") and not text.endswith("\n")
        raise DataError(f"{path}:{i}: " + ("the last line is cut off (truncated file?)" if cut else
                                           f"not JSON ({exc})")) from None
    kind = rec.get("type") if isinstance(rec, dict) else None
    if kind not in RECORDS:
        raise DataError(f"{path}:{i}: not a results record (type {kind!r}; {SCHEMA_VERSION} has {sorted(RECORDS)})")
    return dict(rec)


def _require(path: str, records: list[dict[str, Any]]) -> None:
    """Raise DataError naming the first record that lacks a field the bench's schema requires."""
    for n, rec in enumerate(records, 1):
        missing = [k for k in RECORDS[rec["type"]]["required"] if k not in rec]
        if missing:
            raise DataError(f"{path}: record {n} ({rec['type']}) lacks {', '.join(missing)} ({SCHEMA_VERSION})")


def read_records(path: str) -> list[dict[str, Any]]:
    """Return the file's records; DataError for a missing, empty or truncated file or a non-JSON line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read: {exc}") from None
    lines = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not lines:
        raise DataError(f"{path}: empty file (not a sloguard bench results file)")
    return [_parse(path, text, i, ln, lines[-1][0]) for i, ln in lines]


def _header(path: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    head = records[0]
    if head.get("type") != "header":
        raise DataError(f"{path}:1: the first record is '{head.get('type')}', not the header: not a bench results file")
    if head.get("schema") != SCHEMA_VERSION:
        raise DataError(f"{path}:1: schema {head.get('schema')!r}; this sloguard reads {SCHEMA_VERSION!r}")
    return head


def _row(rec: dict[str, Any], rate: bool) -> dict[str, Any]:
    row = dict(rec)
    if rate:  # open loop: what a user who arrived at the scheduled instant waited
        row["ttft_s"], row["e2e_s"] = rec.get("ttft_sched_s"), rec.get("e2e_sched_s")
    else:  # closed loop: the stream's cycle, free -> free (Little's law); a failed request ran elapsed_s
        ran = rec.get("e2e_s") if rec.get("e2e_s") is not None else rec.get("elapsed_s")
        parts = (rec.get("send_lag_s"), rec.get("connect_s") or 0.0, ran)
        row["cycle_s"] = None if any(x is None for x in parts) else sum(x for x in parts if x is not None)
    row["itl_s"] = rec.get("itl_p50_s")
    row["decode_s"] = None if rec.get("e2e_s") is None or rec.get("ttft_s") is None else rec["e2e_s"] - rec["ttft_s"]
    row["outcome"] = outcome_of(bool(rec.get("ok")), rec.get("error"), rec.get("ttft_s"))
    return row


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
        out.update({f"{part}.{k}": v for k, v in (head.get(part) or {}).items()})
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
    """Return the Side a results file describes; DataError for anything that cannot be compared."""
    return side_from_records(read_records(path), role, path)


def side_from_records(records: list[dict[str, Any]], role: str, path: str) -> Side:
    """Return the Side of a results file's records (`path` names it in messages)."""
    head = _header(path, records)
    _require(path, records)
    stages = _stages(records)
    rate = {s.index for s in stages if s.kind == "rate"}
    rows, excluded = [], {"other behaviour": 0}
    for rec in records:
        if rec["type"] != "request":
            continue
        if rec.get("behaviour", "normal") != "normal":
            excluded["other behaviour"] += 1
        else:
            rows.append(_row(rec, int(rec["stage"]) in rate))
    try:
        requests = build_requests(rows, path)
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: a request record lacks or mistypes a field ({exc})") from None
    target = head.get("target") or {}
    slos, why_not = _config_slos(path, head) if head.get("slos") else ([], None)
    ts = [float(r["ts"]) for r in rows if r.get("ts") is not None]
    side = Side(role=role, kind="bench", spec=path, requests=requests, stages=stages, max_load=_max_load(records),
                identity={"target": target.get("name"), "engine": target.get("engine"),
                          "engine_version": target.get("engine_version"), "model": target.get("model"),
                          "labels": dict(head.get("labels") or {})},
                environment=_environment(head, records), workload=workload_of(head),
                slos=slos, time_range=(min(ts, default=None), max(ts, default=None)),
                excluded={k: v for k, v in excluded.items() if v})
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
