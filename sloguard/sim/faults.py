"""Fault injection state: parsed from `POST /sim/faults` JSON, merged, cleared; decisions are seeded.

Fields (any subset per POST; POST merges into the current faults, DELETE clears all):
`latency_multiplier` (× every engine step, > 0), `error_rate` (fraction of client requests answered
HTTP 500), `stall_first_token_s` (extra wait before a request enters the engine, inside TTFT),
`hang` (accept, never answer until the client goes away), `midstream_error_rate` (fraction of
streams that send an SSE error event half-way and close), `garbage_metrics` (`/metrics` answers 200
with junk: true or "html" for an HTML page, "binary" for random bytes), `network_delay_s` (the request
reaches the server this much later: a network/gateway delay before the response head, outside the
server's own TTFT).

Unhappy-path faults (sloguard.sim.unhappy): `leak_on_cancel` (a client that goes away no longer cancels its
request: it keeps its batch slot and generates its full length for nobody), `oversized_prompt` (a prompt
over the context length is answered `"reject"`: a fast HTTP 400 as vLLM does, the default; `"hang"`: accepted
with a 200 stream head and then nothing, until the client gives up; `"truncate"`: silently cut to fit and
answered), `oversized_reject_delay_s` (seconds before the 400: a server slow to say no). Engine knobs:
`spec_acceptance` (the draft model's per-token acceptance probability, with `--spec-tokens`), and
`prefix_hit_ratio` (share of background prompts served from the prefix cache; null = the profile's).

Faults that act through the engine model, so the daemon must infer them (sloguard.diagnose): `load_multiplier`
(× the background request rate: a load surge that fills the batch and the queue), `kv_blocks` (the KV cache
shrinks to this many blocks, 0 = the profile's: admission waits for blocks and running requests are preempted
and recomputed), `prompt_scale` (× every background prompt's length: longer prefill steps that block other
requests), `gpu_clock_ratio` (the GPU runs at this share of its max SM clock, thermally throttled: every
engine step takes 1/ratio as long, and the dcgm page shows the lower clock with the thermal clock-event
reasons), `cpu_burn` (a thread in the server process burns this share of one core while holding the GIL, in
100 ms slices like a long tokenizer call: the event loop, hence HTTP handling, token delivery and engine
steps, waits for it), `engine_restart_s` (an action: the engine restarts now, its in-flight requests fail, its
counters reset, and it takes this many seconds to come back, then runs a warm-up three times as long at a
quarter speed; new requests queue meanwhile).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

GARBAGE_HTML = (b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n"
                b"<body><h1>Bad Gateway</h1><p>upstream sent garbage</p></body></html>\n")


@dataclass(frozen=True, slots=True)
class Faults:
    """The currently injected faults; the default value injects nothing."""

    latency_multiplier: float = 1.0
    error_rate: float = 0.0
    stall_first_token_s: float = 0.0
    hang: bool = False
    midstream_error_rate: float = 0.0
    garbage_metrics: bool | str = False
    network_delay_s: float = 0.0
    leak_on_cancel: bool = False
    oversized_prompt: str = "reject"
    oversized_reject_delay_s: float = 0.0
    spec_acceptance: float = 0.7
    prefix_hit_ratio: float | None = None
    load_multiplier: float = 1.0
    kv_blocks: int = 0
    prompt_scale: float = 1.0
    gpu_clock_ratio: float = 1.0
    cpu_burn: float = 0.0
    engine_restart_s: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """Return the faults as a JSON-ready dict."""
        return asdict(self)


def _number(key: str, value: object, low: float, high: float | None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key}: expected a number, got {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{key}: {value} outside [{low}, {high if high is not None else 'inf'}]")
    return float(value)


def _flag(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{key}: expected true or false, got {value!r}")
    return value


OVERSIZED = ("reject", "hang", "truncate")


def _choice(key: str, value: object, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{key}: expected one of {', '.join(allowed)}, got {value!r}")
    return value


def _garbage(key: str, value: object) -> bool | str:
    if isinstance(value, bool) or value in ("html", "binary"):
        return value
    raise ValueError(f"{key}: expected true, false, \"html\" or \"binary\", got {value!r}")


# key -> validator; the table is the schema of the faults JSON.
FIELDS: dict[str, Callable[[str, object], object]] = {
    "latency_multiplier": lambda k, v: _number(k, v, 0.01, 1000.0),
    "error_rate": lambda k, v: _number(k, v, 0.0, 1.0),
    "stall_first_token_s": lambda k, v: _number(k, v, 0.0, 3600.0),
    "hang": _flag,
    "midstream_error_rate": lambda k, v: _number(k, v, 0.0, 1.0),
    "garbage_metrics": _garbage,
    "network_delay_s": lambda k, v: _number(k, v, 0.0, 60.0),
    "leak_on_cancel": _flag,
    "oversized_prompt": lambda k, v: _choice(k, v, OVERSIZED),
    "oversized_reject_delay_s": lambda k, v: _number(k, v, 0.0, 600.0),
    "spec_acceptance": lambda k, v: _number(k, v, 0.0, 1.0),
    "prefix_hit_ratio": lambda k, v: None if v is None else _number(k, v, 0.0, 1.0),
    "load_multiplier": lambda k, v: _number(k, v, 0.0, 1000.0),
    "kv_blocks": lambda k, v: int(_number(k, v, 0, 10_000_000)),
    "prompt_scale": lambda k, v: _number(k, v, 0.01, 1000.0),
    "gpu_clock_ratio": lambda k, v: _number(k, v, 0.05, 1.0),
    "cpu_burn": lambda k, v: _number(k, v, 0.0, 1.0),
    "engine_restart_s": lambda k, v: _number(k, v, 0.0, 600.0),
}


def merge(current: Faults, payload: object) -> Faults:
    """Return `current` updated with the validated keys of `payload`; ValueError names the bad key."""
    if not isinstance(payload, dict):
        raise ValueError("faults must be a JSON object")
    unknown = sorted(set(payload) - set(FIELDS))
    if unknown:
        raise ValueError(f"unknown fault keys: {', '.join(unknown)}; known: {', '.join(FIELDS)}")
    updates: dict[str, Any] = {k: FIELDS[k](k, v) for k, v in payload.items()}
    return replace(current, **updates)


def roll(rate: float, rng: random.Random) -> bool:
    """Return True with probability `rate`; draws from `rng` only when 0 < rate < 1."""
    if rate <= 0.0:
        return False
    return rate >= 1.0 or rng.random() < rate


def garbage_body(mode: bool | str, rng: random.Random) -> tuple[bytes, str]:
    """Return (body, content type) of a junk `/metrics` answer."""
    if mode == "binary":
        return rng.randbytes(512), "application/octet-stream"
    return GARBAGE_HTML, "text/html; charset=utf-8"
