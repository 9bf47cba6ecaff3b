"""Read a `sloguard bench -o FILE` results file (schema `sloguard-bench/1`) into a Side.

The one adapter between the bench's results format and reports: records are told apart by `type`
(header, request, stage, max_load, end). Warm-up requests, requests cancelled by an early stage end and
requests of other behaviours than `normal` are left out (counted in `excluded`). Open-loop stages use the
latencies from the scheduled send time (no coordinated omission), as the bench judges them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sloguard.reports.data import DataError, LoadStage, Side, build_requests, outcome_of

SCHEMA = "sloguard-bench/1"
# Workload fields two runs must share to be compared request for request (the nonce is per run).
WORKLOAD_KEYS = ("api", "max_tokens", "ignore_eos", "prompt_mix", "dataset", "behaviours")


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


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
    records = []
    for i, ln in lines:
        try:
            rec = json.loads(ln, parse_constant=_reject_constant)
        except ValueError as exc:
            cut = i == lines[-1][0] and ln.lstrip().startswith("{") and not text.endswith("\n")
            raise DataError(f"{path}:{i}: " + ("the last line is cut off (truncated file?)" if cut else
                                               f"not JSON ({exc})")) from None
        if not isinstance(rec, dict) or "type" not in rec:
            raise DataError(f"{path}:{i}: not a results record (no 'type')")
        records.append(rec)
    return records


def _header(path: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    head = records[0]
    if head.get("type") != "header":
        raise DataError(f"{path}:1: the first record is '{head.get('type')}', not the header: not a bench results file")
    if head.get("schema") != SCHEMA:
        raise DataError(f"{path}:1: schema {head.get('schema')!r}; this sloguard reads {SCHEMA!r}")
    return head


def _row(rec: dict[str, Any], rate: bool) -> dict[str, Any]:
    row = dict(rec)
    if rate:  # open loop: what a user who arrived at the scheduled instant waited
        row["ttft_s"], row["e2e_s"] = rec.get("ttft_from_scheduled_s"), rec.get("e2e_from_scheduled_s")
    elif rec.get("ended_s") is not None and rec.get("scheduled_s") is not None:
        row["cycle_s"] = rec["ended_s"] - rec["scheduled_s"]
    row["itl_s"] = rec.get("itl_p50_s")
    if rec.get("elapsed_s") is None and rec.get("ended_s") is not None and rec.get("started_s") is not None:
        row["elapsed_s"] = rec["ended_s"] - rec["started_s"]
    row["decode_s"] = None if rec.get("e2e_s") is None or rec.get("ttft_s") is None else rec["e2e_s"] - rec["ttft_s"]
    row["outcome"] = outcome_of(bool(rec.get("ok")), rec.get("error"), rec.get("ttft_s"))
    return row


def _stages(records: list[dict[str, Any]]) -> tuple[LoadStage, ...]:
    out = []
    for r in records:
        if r["type"] == "stage":
            load = r.get("load") or {}
            rps = (r.get("throughput") or {}).get("rps")
            out.append(LoadStage(int(r.get("stage", 0)), str(load.get("kind", "")), float(load.get("level", 0)),
                                 None if rps is None else float(rps), str(r.get("ended", "completed"))))
    return tuple(out)


def _environment(head: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    gpu = next((r["gpu"] for r in records if r["type"] == "stage" and r.get("gpu")), None)
    slo_file = head.get("slo_file") or {}
    machine = head.get("machine") or {}
    return {"sloguard_version": head.get("sloguard_version"), "created": head.get("created"),
            "config_sha256": slo_file.get("sha256"), "client_cpus": machine.get("cpus"),
            "client_load_average": machine.get("load_average"), "gpu": gpu}


def workload_of(head: dict[str, Any]) -> dict[str, Any]:
    """Return the workload identity of a run plus its load plan (what must match to compare)."""
    wl = head.get("workload") or {}
    plan = head.get("plan") or {}
    out = {k: wl.get(k) for k in WORKLOAD_KEYS if k in wl}
    out["load_kind"] = plan.get("kind")
    out["seed"] = wl.get("seed")
    return out


def read_bench(path: str, role: str) -> Side:
    """Return the Side a results file describes; DataError for anything that cannot be compared."""
    return side_from_records(read_records(path), role, path)


def side_from_records(records: list[dict[str, Any]], role: str, path: str) -> Side:
    """Return the Side of a results file's records (`path` names it in messages)."""
    head = _header(path, records)
    stages = _stages(records)
    rate = {s.index for s in stages if s.kind == "rate"}
    rows, excluded = [], {"warm-up": 0, "cancelled": 0, "other behaviour": 0}
    for rec in records:
        if rec["type"] != "request":
            continue
        if rec.get("warmup"):
            excluded["warm-up"] += 1
        elif rec.get("outcome") == "cancelled":
            excluded["cancelled"] += 1
        elif rec.get("behaviour", "normal") != "normal":
            excluded["other behaviour"] += 1
        else:
            rows.append(_row(rec, int(rec.get("stage", 0)) in rate))
    try:
        requests = build_requests(rows, path)
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: a request record lacks or mistypes a field ({exc})") from None
    target = head.get("target") or {}
    ts = [float(r["ts"]) for r in rows if r.get("ts") is not None]
    side = Side(role=role, kind="bench", spec=path, requests=requests, stages=stages,
                max_load=next((r for r in records if r["type"] == "max_load"), None),
                identity={"target": target.get("name"), "engine": target.get("engine"),
                          "engine_version": target.get("engine_version"), "model": target.get("model"),
                          "labels": dict(head.get("labels") or {})},
                environment=_environment(head, records), workload=workload_of(head),
                slos=list(head.get("slos") or []), time_range=(min(ts, default=None), max(ts, default=None)),
                excluded={k: v for k, v in excluded.items() if v})
    if not any(r["type"] == "end" for r in records):
        side.notes.append(f"{path}: the run did not finish (no end record); {len(stages)} complete stage(s) read")
    return side
