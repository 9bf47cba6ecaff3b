"""Engine maps as data (ENGINES), engine auto-detection, and normalisation to one engine-agnostic view."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sloguard.model import Sample, ServerView
from sloguard.sources.engines.llamacpp import LLAMACPP
from sloguard.sources.engines.normalise import apply_map, index
from sloguard.sources.engines.schema import Alias, EngineMap
from sloguard.sources.engines.sglang import SGLANG
from sloguard.sources.engines.tgi import TGI
from sloguard.sources.engines.triton import TRITON
from sloguard.sources.engines.trtllm import TRTLLM
from sloguard.sources.engines.vllm import VLLM

__all__ = ["ENGINES", "Alias", "EngineMap", "detect_engine", "normalise"]

ENGINES: dict[str, EngineMap] = {m.name: m for m in (VLLM, SGLANG, TGI, TRITON, LLAMACPP, TRTLLM)}
_PREFIXES = tuple((p, m.name) for m in ENGINES.values() for p in m.prefixes)


def detect_engine(samples: Sequence[Sample]) -> str | None:
    """Return the engine whose prefixes name the most samples, or None when no engine's do."""
    votes: Counter[str] = Counter()
    seen: dict[str, str | None] = {}
    for s in samples:
        if s.name not in seen:
            seen[s.name] = next((e for p, e in _PREFIXES if s.name.startswith(p)), None)
        engine = seen[s.name]
        if engine is not None:
            votes[engine] += 1
    return votes.most_common(1)[0][0] if votes else None


def normalise(
    samples: Sequence[Sample], engine: str, target: str, ts: float, default_model: str = "default"
) -> ServerView:
    """Return the canonical view; engine may be "auto" (engine "unknown", no models, when undetected).

    `default_model` names the model of engines whose exposition has no model label (TGI, llama.cpp).
    Raises ValueError only for an engine name that is neither "auto" nor in ENGINES.
    """
    name = detect_engine(samples) if engine == "auto" else engine
    if name is None:
        return ServerView(target=target, engine="unknown", ts=ts, models={})
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}: use auto or one of {', '.join(ENGINES)}")
    return apply_map(ENGINES[name], index(samples), target, ts, default_model)
