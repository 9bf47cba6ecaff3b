"""Bench results records (`sloguard-bench/1`) made in-process from the simulator's model in virtual time.

What `sloguard bench` would write against `sloguard sim`, without the wall clock: a closed-loop stage per
concurrency level, or one open-loop stage of spaced requests (a probe's pattern: one request every
`interval` ± 50 %). `time_scale` > 1 stretches every step and slows the background arrivals by the same
factor, so every latency distribution is exactly `time_scale` × the unscaled one (a known true
regression). Used by benchmarks/report_power.py, the report tests and docs/report-sample.*.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from typing import Any

from sloguard import __version__
from sloguard.probes.workload import bucket_for
from sloguard.sim.simulator import DEFAULT_BACKGROUND_RPS, DEFAULT_MODEL
from sloguard.sim.virtual import Done, VirtualServer, closed_loop, spaced

MIX: tuple[tuple[int, float], ...] = ((64, 50.0), (128, 35.0), (256, 15.0))  # sloguard.example.yaml's probe
BUCKETS: tuple[tuple[str, int], ...] = (("short", 256), ("medium", 2048))
SLOS = [{"name": "chat-latency", "objectives": [{"metric": "ttft", "percentile": 95, "threshold_s": 1.0},
                                                {"metric": "tpot", "percentile": 50, "threshold_s": 0.1}],
         "goodput": {"target": 0.99, "ttft": 0.5, "tpot": 0.1}, "error_rate": 0.995}]


def header(seed: int, kind: str, levels: Sequence[float], labels: dict[str, str], max_tokens: int,
           mix: Sequence[tuple[int, float]] = MIX) -> dict[str, Any]:
    """Return a header record as `sloguard bench` writes it, for the simulator as target `sim`."""
    ident: dict[str, Any] = {"api": "chat", "seed": seed, "max_tokens": max_tokens, "ignore_eos": False,
                             "behaviours": [["normal", 1.0]],
                             "prompt_mix": [{"tokens": t, "weight": w} for t, w in mix]}
    ident["digest"] = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    return {"type": "header", "schema": "sloguard-bench/1", "sloguard_version": __version__,
            "created": "2026-11-24T00:00:00.000Z", "command": ["sloguard", "bench", "(virtual time)"],
            "target": {"name": "sim", "api_url": "http://127.0.0.1:8000", "engine": "vllm",
                       "engine_version": None, "model": DEFAULT_MODEL, "api": "chat"},
            "slo_file": {"path": "sloguard.example.yaml", "sha256": "0" * 64}, "slos": SLOS,
            "criteria": ["chat-latency: goodput"], "labels": labels,
            "machine": {"hostname": "virtual", "cpus": 1, "load_average": [0.0, 0.0, 0.0]},
            "workload": {**ident, "nonce": "virtual"},
            "plan": {"mode": kind, "kind": kind, "levels": list(levels), "size": {}}}


def request(d: Done, stage: int, load: dict[str, Any], seq: int, t0: float) -> dict[str, Any]:
    """Return the request record of one finished request (every request succeeds in the model)."""
    gaps = sorted(d.itls_s)
    start = d.arrival - t0
    return {"type": "request", "stage": stage, "load": load, "seq": seq, "worker": 0, "stream": None,
            "behaviour": "normal", "warmup": False, "outcome": "success", "error_kind": "none",
            "scheduled_s": start, "started_s": start, "ended_s": start + d.e2e_s, "send_lag_s": 0.0,
            "ttft_from_scheduled_s": d.ttft_s, "e2e_from_scheduled_s": d.e2e_s, "ts": 1.8e9 + d.arrival,
            "ok": True, "error": None, "status_code": 200, "ttft_s": d.ttft_s, "ttfot_s": d.ttft_s,
            "tpot_s": d.tpot_s, "e2e_s": d.e2e_s, "itl_p50_s": gaps[len(gaps) // 2] if gaps else None,
            "itl_p99_s": gaps[int(0.99 * (len(gaps) - 1))] if gaps else None,
            "itl_max_s": gaps[-1] if gaps else None, "connect_s": 0.0, "prompt_tokens": d.prompt_tokens,
            "output_tokens": d.output_tokens, "prompt_bucket": bucket_for(d.prompt_tokens, BUCKETS), "trace_id": "",
            "queue_s": d.queue_s, "prefill_s": d.prefill_s, "network_s": 0.0}


def stage_record(stage: int, load: dict[str, Any], done: Sequence[Done], window: float) -> dict[str, Any]:
    """Return a stage summary with the fields reports read (counts, throughput, ended)."""
    n = len(done)
    return {"type": "stage", "stage": stage, "load": load, "ended": "completed",
            "requests": {"sent": n, "warmup": 0, "measured": n, "success": n, "errors": 0, "timeouts": 0,
                         "cancelled": 0, "stalls": 0, "by_error": {}, "by_behaviour": {"normal": n}},
            "throughput": {"window_s": window, "rps": n / window if window > 0 else 0.0,
                           "output_tokens_per_s": sum(d.output_tokens for d in done) / window if window > 0 else 0.0,
                           "offered_rps": None}}


def closed_run(seed: int, levels: Sequence[int], per_stage: int, time_scale: float = 1.0,
               labels: dict[str, str] | None = None, max_tokens: int = 64,
               background_rps: float = DEFAULT_BACKGROUND_RPS) -> list[dict[str, Any]]:
    """Return the records of a concurrency sweep: `per_stage` requests at each level."""
    records = [header(seed, "concurrency", levels, labels or {}, max_tokens)]
    rng = random.Random(f"{seed}/workload")
    for i, c in enumerate(levels):
        server = VirtualServer(seed * 1000 + i, multiplier=time_scale, background_rps=background_rps / time_scale)
        load = {"kind": "concurrency", "level": c}
        t0 = server.now
        done = sorted(closed_loop(server, c, per_stage, MIX, max_tokens, rng), key=lambda d: d.arrival)
        records += [request(d, i, load, k, t0) for k, d in enumerate(done)]
        records.append(stage_record(i, load, done, server.now - t0))
    records.append(_end(len(levels)))
    return records


def spaced_run(seed: int, n: int, interval: float = 1.0, time_scale: float = 1.0,
               labels: dict[str, str] | None = None, max_tokens: int = 64,
               background_rps: float = DEFAULT_BACKGROUND_RPS) -> list[dict[str, Any]]:
    """Return the records of `n` probe-like requests, one every `interval` (scaled with the server)."""
    server = VirtualServer(seed, multiplier=time_scale, background_rps=background_rps / time_scale)
    level = round(1.0 / interval, 6)  # the same label at any time scale
    load: dict[str, Any] = {"kind": "rate", "level": level}
    done = spaced(server, n, interval * time_scale, MIX, max_tokens, random.Random(f"{seed}/workload"))
    done.sort(key=lambda d: d.arrival)
    records = [header(seed, "rate", [level], labels or {}, max_tokens)]
    records += [request(d, 0, load, k, 0.0) for k, d in enumerate(done)]
    records += [stage_record(0, load, done, server.now), _end(1)]
    return records


def _end(stages: int) -> dict[str, Any]:
    return {"type": "end", "status": "complete", "stages": stages, "ended_at": "2026-11-24T00:00:00.000Z"}


def write(path: str, records: Iterable[dict[str, Any]]) -> None:
    """Write records as JSON lines."""
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
