"""One recording event per JSON line: what the daemon saw, as plain JSON values (pure; no I/O).

Kinds: `header` (format version, the config's YAML text, start time, free-form meta), `page` (one engine
/metrics body as scraped, with the scrape's timestamp), `scrape_error`, `host` (the host source's samples),
`drain` (the probe results handed over by the probe process, before any server record was joined, and the
probes' own starts and prefills that the diagnosis subtracts from the users' load), `evaluate` (an evaluation
at `t`, with the machine's load averages), `mark` (a fault injected or cleared by whoever drove the
recording) and `meta` (facts learned after the start: what the load really was, the engine's version).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sloguard.model import LIVE_ONLY_FIELDS, ProbeResult, Sample

VERSION = 1
RECORDED_LIVE = frozenset({"head_raw_s"})  # live-only fields a replay needs (the slot-start queue)
_KEPT = (LIVE_ONLY_FIELDS - RECORDED_LIVE)
_FIELDS = tuple(f.name for f in dataclasses.fields(ProbeResult) if f.name not in _KEPT)
_NAMES = frozenset(f.name for f in dataclasses.fields(ProbeResult))


def result_doc(r: ProbeResult) -> dict[str, Any]:
    """Return a probe result as JSON (the live-only per-bucket ITL counts left out; defaults omitted)."""
    out: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(r, name)
        if (value is not None and value != "") or name in ("ts", "probe", "target", "model", "api", "ok"):
            out[name] = value
    return out


def result_of(doc: Mapping[str, Any]) -> ProbeResult:
    """Return the probe result a `result_doc` wrote (unknown keys from a newer writer are ignored)."""
    return ProbeResult(**{k: v for k, v in doc.items() if k in _NAMES and k not in _KEPT})


def samples_doc(samples: Iterable[Sample]) -> list[list[Any]]:
    """Return samples as [name, labels, value] triples."""
    return [[s.name, dict(s.labels), s.value] for s in samples]


def samples_of(doc: Sequence[Sequence[Any]]) -> list[Sample]:
    """Return the samples `samples_doc` wrote."""
    return [Sample(str(name), {str(k): str(v) for k, v in labels.items()}, float(value))
            for name, labels, value in doc]


def drain_doc(t: float, raw: Sequence[ProbeResult], started: Sequence[tuple[str, float]],
              reached: Sequence[ProbeResult], prefilled: Sequence[tuple[str, str, float, int]]) -> dict[str, Any]:
    """Return one drain of the probe process: raw results, the probes started, reached and prefilled."""
    return {"kind": "drain", "t": t, "results": [result_doc(r) for r in raw],
            "started": [list(s) for s in started], "reached": [result_doc(r) for r in reached],
            "prefilled": [list(p) for p in prefilled]}


@dataclasses.dataclass(frozen=True)
class Drain:
    """One drain, decoded."""

    t: float
    results: tuple[ProbeResult, ...]
    started: tuple[tuple[str, float], ...]
    reached: tuple[ProbeResult, ...]
    prefilled: tuple[tuple[str, str, float, int], ...]


def drain_of(doc: Mapping[str, Any]) -> Drain:
    """Return the drain `drain_doc` wrote."""
    return Drain(float(doc["t"]), tuple(result_of(r) for r in doc.get("results", ())),
                 tuple((str(a), float(b)) for a, b in doc.get("started", ())),
                 tuple(result_of(r) for r in doc.get("reached", ())),
                 tuple((str(a), str(b), float(c), int(d)) for a, b, c, d in doc.get("prefilled", ())))
