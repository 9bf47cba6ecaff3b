"""Like with like: refuse (or, with --allow-mismatch, warn about) comparisons of different workloads.

Refused: different kinds of input, bench runs whose `workload_digest` differ in what requests were sent
and how (any workload field, the load kind, arrival process and warm-up: see reports.bench), no common load
level, too few successful requests. Warned about: different targets, models, SLO files, load levels, stage
sizes or modes only one side ran. Never compared silently.
"""

from __future__ import annotations

from typing import Any

from sloguard.reports.data import DataError, Side

MIN_SUCCESSES = 20
REFUSE_KEYS = ("api", "max_tokens", "ignore_eos", "prompt_mix", "dataset", "behaviours", "load_kind")
WARN_KEYS = ("probes", "prompt_buckets")  # different seeds draw the same mix: not worth a warning


def _show(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict) and "tokens" in value[0]:
        return "{" + ", ".join(f"{d['tokens']}: {d.get('weight', 1):g}" for d in value) + "}"
    return "none" if value is None else str(value)


def differences(base: dict[str, Any], cand: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    """Return 'field: baseline X, candidate Y' for each key whose values differ."""
    return [f"{k}: baseline {_show(base.get(k))}, candidate {_show(cand.get(k))}"
            for k in keys if (k in base or k in cand) and base.get(k) != cand.get(k)]


def check(base: Side, cand: Side, allow_mismatch: bool = False) -> list[str]:
    """Return warnings; raise DataError naming what differs when the two cannot be compared."""
    if base.kind != cand.kind:
        raise DataError(f"the baseline is a {base.kind} input ({base.spec}) and the candidate a {cand.kind} input "
                        f"({cand.spec}): compare like with like (bench with bench, store with store, prom with prom)")
    _enough(base, base.successes(), "successful ")
    _enough(cand, cand.count(), "")  # failures are data (censored latencies, error rate): any outcome counts
    if base.kind == "bench":  # the bench's own workload identity (header `workload_digest`)
        from sloguard.reports.bench import bench_differences

        refused, warnings = bench_differences(base.workload, cand.workload)
    else:
        warnings = differences(base.workload, cand.workload, WARN_KEYS)
        refused = differences(base.workload, cand.workload, REFUSE_KEYS)
    levels_b, levels_c = {s.label for s in base.stages}, {s.label for s in cand.stages}
    if base.stages and cand.stages and not levels_b & levels_c:
        refused.append(f"load levels: baseline {sorted(levels_b)}, candidate {sorted(levels_c)} (none in common)")
    elif levels_b ^ levels_c:
        warnings.append(f"load levels run by one side only are compared in 'overall' only through the common ones: "
                        f"{sorted(levels_b ^ levels_c)}")
    if refused and not allow_mismatch:
        raise DataError("the workloads differ, so latencies are not comparable: " + "; ".join(refused) +
                        " (--allow-mismatch compares anyway)")
    warnings += [f"compared despite a different workload: {r}" for r in refused]
    for key in ("target", "model", "engine"):
        if base.identity.get(key) != cand.identity.get(key):
            warnings.append(f"{key}: baseline {base.identity.get(key)}, candidate {cand.identity.get(key)}")
    digest_b, digest_c = base.environment.get("config_sha256"), cand.environment.get("config_sha256")
    if digest_b and digest_c and digest_b != digest_c:
        warnings.append("the SLO files differ (sha256): objectives are taken from the baseline's")
    return warnings


def _enough(side: Side, have: int, what: str) -> None:
    """The baseline is the reference: it needs successes; the candidate needs requests, failed or not."""
    if have < MIN_SUCCESSES:
        raise DataError(f"{side.role} {side.spec}: {have} {what}request(s) of {side.count()}; a comparison needs at "
                        f"least {MIN_SUCCESSES} {what}requests in the {side.role} (p50 needs 10 values per side, "
                        "p95 100, p99 500 to be judged)")
