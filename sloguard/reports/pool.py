"""Several bench results files of one release pooled into one side: the rounds of an interleaved comparison.

A host whose load changes during a comparison (a CI runner shared with other jobs) slows whichever release
ran then: a baseline run and a candidate run taken one after the other differ by the host as well as by the
release. Interleaving cancels that: bench in short rounds, A, B, A, B, ..., and give each side all of its
rounds. The pooled side keeps the requests in time order (the block bootstrap reads drift between rounds as
dependence and widens its intervals), holds one load stage per load level, and refuses files that are not
one release under one workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from sloguard.reports.bench import bench_differences
from sloguard.reports.data import DataError, LoadStage, Requests, Side


def pool(sides: Sequence[Side]) -> Side:
    """Return one side holding every request of `sides` (bench files of one release, in time order).

    DataError names the first file that is not the same release (identity) or workload as the first one,
    and refuses a search run (its stages are the search's own).
    """
    if len(sides) == 1:
        return sides[0]
    first = sides[0]
    for s in sides:
        _check(first, s)
    ordered = sorted(sides, key=lambda s: np.inf if s.time_range[0] is None else s.time_range[0])
    labels = list(dict.fromkeys(st.label for s in ordered for st in s.stages))
    requests = _concat([_restaged(s, labels) for s in ordered])
    starts = [s.time_range[0] for s in ordered if s.time_range[0] is not None]
    ends = [s.time_range[1] for s in ordered if s.time_range[1] is not None]
    excluded: dict[str, int] = {}
    for s in ordered:
        for k, v in s.excluded.items():
            excluded[k] = excluded.get(k, 0) + v
    return Side(role=first.role, kind=first.kind, spec=" + ".join(s.spec for s in ordered), requests=requests,
                stages=tuple(_stage(i, label, ordered) for i, label in enumerate(labels)),
                identity=first.identity, environment=first.environment, workload=first.workload, slos=first.slos,
                time_range=(min(starts, default=None), max(ends, default=None)), excluded=excluded,
                notes=[n for s in ordered for n in s.notes])


def _check(first: Side, s: Side) -> None:
    if s.kind != "bench" or s.requests is None:
        raise DataError(f"{s.role} {s.spec}: only bench results files can be pooled (several per side)")
    if s.max_load is not None:
        raise DataError(f"{s.role} {s.spec}: a search run (--find-max-load) cannot be pooled with other files")
    if s.identity != first.identity:
        raise DataError(f"{s.role}: {s.spec} is {_release(s)} but {first.spec} is {_release(first)}: the files of "
                        "one side must be one release")
    refused, _ = bench_differences(first.workload, s.workload)  # sizes and levels may differ between rounds
    if refused:
        raise DataError(f"{s.role}: {s.spec} ran another workload than {first.spec}: " + "; ".join(refused).replace(
            "baseline ", f"{first.spec} ").replace("candidate ", f"{s.spec} "))


def _release(s: Side) -> str:
    ident = s.identity
    labels = ",".join(f"{k}={v}" for k, v in sorted((ident.get("labels") or {}).items()))
    return f"{ident.get('target')} {ident.get('engine')} {ident.get('engine_version')} {ident.get('model')} " \
           f"{{{labels}}}"


def _restaged(s: Side, labels: list[str]) -> Requests:
    """Return the side's requests with each stage index replaced by its load level's index in `labels`."""
    assert s.requests is not None
    index = {st.index: labels.index(st.label) for st in s.stages}
    stage = np.array([index.get(int(i), -1) for i in s.requests.stage], dtype=np.int64)
    return replace(s.requests, stage=stage)


def _concat(parts: list[Requests]) -> Requests:
    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])

    return Requests(latency={m: np.concatenate([p.latency[m] for p in parts]) for m in parts[0].latency},
                    stages={m: np.concatenate([p.stages[m] for p in parts]) for m in parts[0].stages},
                    ok=cat("ok"), outcome=cat("outcome"), bucket=cat("bucket"), stage=cat("stage"), ts=cat("ts"),
                    cycle=cat("cycle"), elapsed=cat("elapsed"))


def _stage(index: int, label: str, sides: Sequence[Side]) -> LoadStage:
    """Return one load level over every file: its throughput is all its requests over all its time."""
    runs = [(s, st) for s in sides for st in s.stages if st.label == label]
    n = [int((s.requests.stage == st.index).sum()) if s.requests is not None else 0 for s, st in runs]
    rates = [st.rps for _, st in runs]
    rps = None
    if all(r is not None and r > 0 for r in rates) and sum(n) > 0:
        rps = sum(n) / sum(k / r for k, r in zip(n, rates, strict=True) if r)
    ended = sorted({st.ended for _, st in runs})
    _, first = runs[0]
    return LoadStage(index, first.kind, first.level, rps, ended[0] if len(ended) == 1 else ", ".join(ended))
