"""The results file format (RESULTS.jsonl), versioned: one JSON object per line, `type` says which.

Order: one `header`; per stage, its `request` rows then its `stage` summary (warm-up requests are not
written: they are counted in the summary); after a search, one `search`; last, one `end` (absent when the
run crashed: the file then ends after the last complete stage, which is written atomically). Times are in
seconds; latencies None/null where undefined. Reports compare two files whose headers' `workload_digest`
match (docs/load-tests.md lists the fields it covers). A new field is a minor change within a version; a
renamed, removed or re-defined one bumps SCHEMA_VERSION.
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = "sloguard.bench/v1"

_NUM = {"type": ["number", "null"]}
_INT = {"type": "integer", "minimum": 0}
_QUANTILES = {"type": "object", "required": ["n", "mean", "p50", "p95", "p99"],
              "properties": {"n": _INT, "mean": _NUM, "p50": _NUM, "p95": _NUM, "p99": _NUM}}
_LOAD = {"load_kind": {"enum": ["concurrency", "rate"]}, "load": {"type": "number", "exclusiveMinimum": 0},
         "stage": _INT}

HEADER = {
    "type": "object",
    "required": ["type", "schema", "sloguard_version", "created", "command", "config", "target", "workload",
                 "workload_digest", "load", "slos", "labels", "machine", "client"],
    "properties": {
        "type": {"const": "header"}, "schema": {"const": SCHEMA_VERSION}, "sloguard_version": {"type": "string"},
        "created": {"type": "string"}, "command": {"type": "array", "items": {"type": "string"}},
        "config": {"type": "object", "required": ["path", "sha256"]},
        "target": {"type": "object", "required": ["name", "engine", "engine_version", "model", "api"]},
        "workload": {"type": "object", "required": ["source", "seed", "api", "max_tokens", "ignore_eos"]},
        "workload_digest": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "load": {"type": "object", "required": ["mode", "kind"],
                 "properties": {"mode": {"enum": ["sweep", "search"]}, "kind": {"enum": ["concurrency", "rate"]}}},
        "slos": {"type": "array", "items": {"type": "object", "required": ["name", "criteria"]}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "machine": {"type": "object", "required": ["hostname", "cpus", "platform", "python"]},
        "client": {"type": "object", "required": ["workers", "timeout_s"]},
    },
}
REQUEST = {
    "type": "object",
    "required": ["type", "stage", "load_kind", "load", "seq", "worker", "behaviour", "ok", "error", "status_code",
                 "scheduled_s", "sent_s", "send_lag_s", "ttft_s", "ttft_sched_s", "e2e_s", "e2e_sched_s", "tpot_s",
                 "itl_p50_s", "itl_p99_s", "output_tokens", "prompt_tokens", "prompt_bucket", "max_tokens", "good"],
    "properties": {
        "type": {"const": "request"}, **_LOAD, "seq": _INT, "worker": _INT, "behaviour": {"type": "string"},
        "ok": {"type": "boolean"}, "error": {"type": ["string", "null"]}, "status_code": {"type": ["integer", "null"]},
        **{k: _NUM for k in ("scheduled_s", "sent_s", "send_lag_s", "ttft_s", "ttft_sched_s", "e2e_s", "e2e_sched_s",
                             "tpot_s", "itl_p50_s", "itl_p99_s")},
        "good": {"type": "object", "additionalProperties": {"type": "boolean"}},
    },
}
_CRITERION = {"type": "object", "required": ["slo", "name", "kind", "target", "n", "hits", "n_eff", "share", "low",
                                             "high", "value", "verdict"],
              "properties": {"verdict": {"enum": ["holds", "breaks", "uncertain"]}}}
STAGE = {
    "type": "object",
    "required": ["type", "stage", "load_kind", "load", "attempt", "status", "started_at", "planned", "warmup",
                 "requests", "ok", "failed", "error_ratio", "errors", "timeouts", "stalls", "rps", "output_tok_s",
                 "latency", "goodput", "send_lag", "client", "server", "gpu", "slo"],
    "properties": {
        "type": {"const": "stage"}, **_LOAD, "attempt": _INT,
        "status": {"enum": ["complete", "interrupted", "hopeless", "overrun"]},
        "latency": {"type": "object", "required": ["ttft", "tpot", "itl", "e2e", "ttft_sched", "e2e_sched"],
                    "additionalProperties": _QUANTILES},
        "send_lag": _QUANTILES,
        "by_behaviour": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["requests", "ok", "ok_ratio", "errors", "ttft", "e2e", "checks"]}},
        "warmup": {"type": "object", "required": ["seconds", "requests"]},
        "slo": {"type": "object", "required": ["verdict", "holds", "margin", "worst", "hopeless", "criteria"],
                "properties": {"verdict": {"enum": ["holds", "breaks", "uncertain"]},
                               "criteria": {"type": "array", "items": _CRITERION}}},
    },
}
SEARCH = {
    "type": "object",
    "required": ["type", "kind", "max_load", "first_break", "low", "high", "estimate", "breaks_first", "stages",
                 "stopped", "points"],
    "properties": {"type": {"const": "search"}, "kind": {"enum": ["concurrency", "rate"]},
                   "stopped": {"enum": ["converged", "ceiling", "floor", "budget", "interrupted"]},
                   **{k: _NUM for k in ("max_load", "first_break", "low", "high", "estimate")}},
}
END = {"type": "object", "required": ["type", "status", "stages", "exit_code"],
       "properties": {"type": {"const": "end"}, "status": {"enum": ["complete", "interrupted"]}, "stages": _INT,
                      "exit_code": {"type": "integer"}}}

RECORDS: dict[str, dict[str, Any]] = {"header": HEADER, "request": REQUEST, "stage": STAGE, "search": SEARCH,
                                      "end": END}


def schema() -> dict[str, Any]:
    """Return a JSON Schema (2020-12) that every line of a results file validates against."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"sloguard bench results line ({SCHEMA_VERSION})",
        "type": "object", "required": ["type"],
        "oneOf": [{"$ref": f"#/$defs/{name}"} for name in RECORDS],
        "$defs": RECORDS,
    }
