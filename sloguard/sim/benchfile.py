"""Bench results records (sloguard.bench.schema) made in-process from the simulator's model in virtual time.

What `sloguard bench` would write against `sloguard sim`, without the wall clock, through the bench's own
row writers (sloguard.bench.record.to_json, sloguard.bench.summary.summarise, sloguard.bench.header.digest):
a closed-loop stage per concurrency level, or one open-loop stage of spaced requests (a probe's pattern:
one request every `interval` ± 50 %). `time_scale` > 1 stretches every step and slows the background
arrivals by the same factor, so every latency distribution is exactly `time_scale` × the unscaled one (a
known true regression). Used by benchmarks/report_power.py and docs/report-sample.* (many seeded runs
that real time could not afford); the report's tests read files of the real `sloguard bench`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from typing import Any

from sloguard import __version__
from sloguard.bench.header import digest
from sloguard.bench.record import RequestRecord, to_json
from sloguard.bench.schema import SCHEMA_VERSION
from sloguard.bench.summary import summarise
from sloguard.model import ProbeResult
from sloguard.probes.workload import bucket_for
from sloguard.sim.simulator import DEFAULT_BACKGROUND_RPS, DEFAULT_ENGINE_VERSION, DEFAULT_MODEL
from sloguard.sim.virtual import Done, VirtualServer, closed_loop, spaced

MIX: tuple[tuple[int, float], ...] = ((64, 50.0), (128, 35.0), (256, 15.0))  # sloguard.example.yaml's probe
BUCKETS: tuple[tuple[str, int], ...] = (("short", 256), ("medium", 2048))
STALL_S = 1.0


def header(seed: int, kind: str, levels: Sequence[float], labels: dict[str, str], max_tokens: int,
           mix: Sequence[tuple[int, float]] = MIX) -> dict[str, Any]:
    """Return a header record as `sloguard bench` writes it, for the simulator as target `sim`."""
    workload: dict[str, Any] = {"source": "probe:chat", "seed": seed, "api": "chat", "max_tokens": max_tokens,
                                "ignore_eos": False, "timeout_s": 60.0, "behaviours": [["normal", 1.0]],
                                "prompts": [[t, w] for t, w in mix]}
    load: dict[str, Any] = {"mode": "sweep", "kind": kind, "levels": [float(x) for x in levels], "duration_s": None,
                            "requests": None, "warmup_s": 0.0, "warmup_requests": 0}
    if kind == "rate":
        load["arrival"] = "spaced"
    return {"type": "header", "schema": SCHEMA_VERSION, "sloguard_version": __version__,
            "created": "2026-11-24T00:00:00+00:00", "command": ["sloguard", "bench", "(virtual time)"],
            "config": {"path": "sloguard.example.yaml", "sha256": "0" * 64},
            "target": {"name": "sim", "api_url": "http://127.0.0.1:8000", "metrics_url": "http://127.0.0.1:8000/metrics",
                       "engine": "vllm", "engine_version": DEFAULT_ENGINE_VERSION, "model": DEFAULT_MODEL,
                       "api": "chat"},
            "workload": workload, "workload_digest": digest(workload, load), "load": load, "slos": [],
            "labels": labels, "machine": {"hostname": "virtual", "cpus": 1, "platform": "virtual time",
                                          "python": "", "loadavg": [0.0, 0.0, 0.0]},
            "client": {"workers": 1, "timeout_s": 60.0}}


def record(d: Done, stage: int, seq: int, t0: float, max_tokens: int) -> RequestRecord:
    """Return the bench's record of one finished request (every request succeeds in the model)."""
    gaps = sorted(d.itls_s)
    start = d.arrival - t0
    result = ProbeResult(
        ts=1.8e9 + d.arrival, probe="bench", target="sim", model=DEFAULT_MODEL, api="chat", ok=True, status_code=200,
        connect_s=0.0, ttft_s=d.ttft_s, ttfot_s=d.ttft_s, e2e_s=d.e2e_s, tpot_s=d.tpot_s,
        itl_p50_s=gaps[len(gaps) // 2] if gaps else None, itl_p99_s=gaps[int(0.99 * (len(gaps) - 1))] if gaps else None,
        itl_max_s=gaps[-1] if gaps else None, prompt_tokens=d.prompt_tokens, output_tokens=d.output_tokens,
        prompt_bucket=bucket_for(d.prompt_tokens, BUCKETS), record="inband", server_ttft_s=d.ttft_s, network_s=0.0,
        queue_s=d.queue_s, prefill_s=d.prefill_s, server_decode_s=d.e2e_s - d.ttft_s, elapsed_s=d.e2e_s)
    return RequestRecord(stage=stage, seq=seq, worker=0, behaviour="normal", max_tokens=max_tokens,
                         scheduled_s=start, sent_s=start, t0_s=start, ended_s=start + d.e2e_s, warmup=False,
                         result=result)


def stage_rows(stage: int, kind: str, level: float, done: Sequence[Done], t0: float,
               max_tokens: int) -> list[dict[str, Any]]:
    """Return a stage's request rows and its summary row, as the bench's runner writes them."""
    recs = [record(d, stage, k, t0, max_tokens) for k, d in enumerate(done)]
    rows = [to_json(r, {}, kind, level) for r in recs]
    summary = summarise(recs, (), STALL_S)
    rows.append({"type": "stage", "stage": stage, "load_kind": kind, "load": level, "attempt": 0,
                 "status": "complete", "started_at": 1.8e9 + t0, "planned": {"duration_s": None, "requests": len(done)},
                 "warmup": {"seconds": 0.0, "requests": 0, "excluded": True}, **summary,
                 "client": {"workers": 1}, "server": {}, "gpu": None,
                 "slo": {"verdict": "uncertain", "holds": None, "margin": None, "worst": None, "hopeless": False,
                         "criteria": []}})
    return rows


def closed_run(seed: int, levels: Sequence[int], per_stage: int, time_scale: float = 1.0,
               labels: dict[str, str] | None = None, max_tokens: int = 64,
               background_rps: float = DEFAULT_BACKGROUND_RPS,
               workload_seed: int | None = None) -> list[dict[str, Any]]:
    """Return the records of a concurrency sweep: `per_stage` requests at each level; the server's draws
    from `seed`, the prompts from `workload_seed` (default `seed`), as the bench's `--seed`."""
    wseed = seed if workload_seed is None else workload_seed
    records = [header(wseed, "concurrency", levels, labels or {}, max_tokens)]
    rng = random.Random(f"{wseed}/workload")
    for i, c in enumerate(levels):
        server = VirtualServer(seed * 1000 + i, multiplier=time_scale, background_rps=background_rps / time_scale)
        t0 = server.now
        done = sorted(closed_loop(server, c, per_stage, MIX, max_tokens, rng), key=lambda d: d.arrival)
        records += stage_rows(i, "concurrency", float(c), done, t0, max_tokens)
    records.append(end_row(len(levels)))
    return records


def spaced_run(seed: int, n: int, interval: float = 1.0, time_scale: float = 1.0,
               labels: dict[str, str] | None = None, max_tokens: int = 64,
               background_rps: float = DEFAULT_BACKGROUND_RPS) -> list[dict[str, Any]]:
    """Return the records of `n` probe-like requests, one every `interval` (scaled with the server)."""
    server = VirtualServer(seed, multiplier=time_scale, background_rps=background_rps / time_scale)
    level = round(1.0 / interval, 6)  # the same label at any time scale
    done = spaced(server, n, interval * time_scale, MIX, max_tokens, random.Random(f"{seed}/workload"))
    done.sort(key=lambda d: d.arrival)
    records = [header(seed, "rate", [level], labels or {}, max_tokens)]
    records += [*stage_rows(0, "rate", level, done, 0.0, max_tokens), end_row(1)]
    return records


def end_row(stages: int) -> dict[str, Any]:
    """Return the end record of a run that completed its stages."""
    return {"type": "end", "status": "complete", "stages": stages, "exit_code": 0}


def write(path: str, records: Iterable[dict[str, Any]]) -> None:
    """Write records as JSON lines."""
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
