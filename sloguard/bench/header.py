"""The results header: who ran what against which server on which machine, and the workload's identity."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sloguard import __version__
from sloguard.bench.judge import Criterion
from sloguard.bench.plan import RunPlan
from sloguard.bench.preflight import TargetInfo
from sloguard.bench.schema import SCHEMA_VERSION
from sloguard.bench.workload import WorkloadSpec
from sloguard.config.spec import TargetSpec


def sha256_file(path: str) -> str:
    """Return the hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def machine() -> dict[str, Any]:
    """Return the client machine: host, CPUs, platform, Python, load average at start."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count() or 1, "platform": platform.platform(),
            "python": sys.version.split()[0], "loadavg": [round(x, 2) for x in load]}


PER_RUN = ("salt",)  # drawn per run so an engine's prompt cache cannot serve a rerun: not what makes runs comparable


def workload_json(workload: WorkloadSpec, source: str, dataset_sha256: str | None) -> dict[str, Any]:
    """Return what defines the requests sent (never the API key)."""
    job = workload.job
    out: dict[str, Any] = {"source": source, "seed": workload.seed, "salt": workload.salt, "api": job.api,
                           "max_tokens": job.max_tokens,
                           "ignore_eos": job.ignore_eos, "timeout_s": job.timeout,
                           "behaviours": [list(b) for b in workload.behaviours]}
    if workload.rows:
        out.update(dataset_sha256=dataset_sha256, rows=len(workload.rows))
    else:
        out["prompts"] = [list(p) for p in job.prompts]
    return out


def load_json(plan: RunPlan) -> dict[str, Any]:
    """Return the load plan: mode, kind, levels or search bounds, stage size, warm-up, arrival process."""
    size = plan.size
    out: dict[str, Any] = {"mode": plan.mode, "kind": plan.kind, "levels": list(plan.levels),
                           "duration_s": size.duration_s, "requests": size.requests, "warmup_s": size.warmup_s,
                           "warmup_requests": size.warmup_n}
    if plan.kind == "rate":
        out["arrival"] = plan.arrival
    if plan.search is not None:
        s = plan.search
        out["search"] = {"start": s.start, "max_load": s.max_load, "min_load": s.min_load, "tolerance": s.tolerance,
                         "max_stages": s.max_stages, "confirm": s.confirm}
    return out


def digest(workload: Mapping[str, Any], load: Mapping[str, Any]) -> str:
    """Return the workload identity: SHA-256 of the canonical workload + load JSON (model, engine and the per-run
    prompt salt excluded: salted runs send the same sizes and mix, only their nonces differ)."""
    same = {k: v for k, v in workload.items() if k not in PER_RUN}
    text = json.dumps({"workload": same, "load": load}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def header(*, argv: Sequence[str], config_path: str, target: TargetSpec, info: TargetInfo, workload: dict[str, Any],
           load: dict[str, Any], criteria: Sequence[Criterion], labels: Mapping[str, str],
           client: Mapping[str, Any]) -> dict[str, Any]:
    """Return the header row."""
    slos: dict[str, list[str]] = {}
    for c in criteria:
        slos.setdefault(c.slo, []).append(c.name)
    return {
        "type": "header", "schema": SCHEMA_VERSION, "sloguard_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"), "command": ["sloguard", "bench", *argv],
        "config": {"path": config_path, "sha256": sha256_file(config_path)},
        "target": {"name": target.name, "api_url": target.api_url, "metrics_url": target.metrics_url,
                   "engine": info.engine, "engine_version": info.engine_version, "model": info.model,
                   "api": workload["api"]},
        "workload": workload, "workload_digest": digest(workload, load), "load": load,
        "slos": [{"name": name, "criteria": names} for name, names in slos.items()],
        "labels": dict(labels), "machine": machine(), "client": dict(client),
    }
