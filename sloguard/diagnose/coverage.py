"""Which causes the diagnosis can name for each target of a config, and which config key enables the rest (pure).

Table-driven: each cause lists what it needs (a signal source the config must have, or a signal the target's
engine must expose: sources.engines maps and capabilities), with the key that provides it. `sloguard check` prints
it; docs/diagnosis-rules.md carries the per-engine table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sloguard.config.spec import Config, TargetSpec
from sloguard.sources.engines import ENGINES
from sloguard.sources.engines.capabilities import capability


@dataclass(frozen=True)
class Ctx:
    """What a need is judged on: the config, one target and its engine's map (None: auto, not known offline)."""

    cfg: Config
    target: TargetSpec

    def has(self, table: str, signal: str) -> bool | None:
        """Return whether the target's engine exposes a canonical signal (None: engine auto, known once scraped)."""
        if self.target.metrics_url is None:
            return False
        emap = ENGINES.get(self.target.engine)
        if emap is None or signal in capability(self.target.engine).some_versions:
            return None
        return signal in getattr(emap, table)


@dataclass(frozen=True)
class Need:
    """One requirement: `ok` answers for a target (None = depends on what auto-detection finds), `key` enables it."""

    what: str
    key: str
    ok: Callable[[Ctx], bool | None]


def _processes(c: Ctx) -> bool:
    return any(p.target in (c.target.name, None) and (p.target or len(c.cfg.targets) == 1)
               for p in c.cfg.host.processes)


def _gpu(c: Ctx) -> bool | None:
    if c.target.dcgm_url or c.cfg.gpu.nvml == "on":
        return True
    return None if c.cfg.gpu.nvml == "auto" else False


def _metrics(c: Ctx) -> bool:
    return c.target.metrics_url is not None


def _network(c: Ctx) -> bool | None:
    head = capability(c.target.engine).head
    return c.target.server_records != "none" or head in ("receipt", "unknown") or None


METRICS = Need("the engine's /metrics", "targets[].metrics_url", _metrics)
GPU = Need("a GPU source", "gpu.nvml: on, or targets[].dcgm_url", _gpu)
PROCESSES = Need("the serving process watched", "host.processes (an entry for this target)", _processes)
QUEUE = Need("a waiting-requests gauge", "targets[].metrics_url of an engine that exposes one",
             lambda c: c.has("gauges", "requests_waiting"))
PROMPTS = Need("prompt-token counters", "targets[].metrics_url of an engine that counts prompt tokens",
               lambda c: c.has("counters", "prompt_tokens"))
KV = Need("a KV-cache usage gauge", "targets[].metrics_url of an engine that exposes KV usage (not newer llama.cpp)",
          lambda c: c.has("gauges", "kv_cache_usage_ratio"))
RECORD = Need("a server TTFT per probe or a head sent on receipt", "targets[].server_records: inband or otlp",
              _network)

# cause -> what it needs (all of)
COVERAGE: tuple[tuple[str, tuple[Need, ...]], ...] = (
    ("engine_restart", (METRICS,)),
    ("gpu_unhealthy", (GPU,)),
    ("gpu_throttled", (GPU,)),
    ("long_prompts", (METRICS, PROMPTS)),
    ("kv_cache_pressure", (METRICS, KV)),
    ("serving_cpu_bound", (PROCESSES,)),
    ("capacity", (METRICS, QUEUE, PROMPTS)),
    ("network", (RECORD,)),
)


def coverage(cfg: Config, target: TargetSpec) -> list[tuple[str, bool | None, tuple[Need, ...]]]:
    """Return (cause, nameable: True / False / None = depends on auto-detection, the needs not met) per cause."""
    ctx = Ctx(cfg, target)
    out = []
    for cause, needs in COVERAGE:
        results = [(n, n.ok(ctx)) for n in needs]
        unmet = tuple(n for n, ok in results if ok is False)
        unsure = any(ok is None for _, ok in results)
        out.append((cause, False if unmet else None if unsure else True, unmet))
    return out


def lines(cfg: Config) -> list[str]:
    """Return `sloguard check`'s diagnosis lines: per target, the causes it can name and what enables the rest."""
    out = []
    for t in cfg.targets:
        rows = coverage(cfg, t)
        named = [c for c, ok, _ in rows if ok]
        maybe = [c for c, ok, _ in rows if ok is None]
        out.append(f"diagnosis: target {t.name} ({t.engine}): can name {', '.join(named) or 'no cause'}"
                   + (f"; depends on what it finds: {', '.join(maybe)}" if maybe else ""))
        for cause, ok, unmet in rows:
            if ok is False:
                out.append(f"diagnosis: target {t.name}: cannot name {cause}: needs "
                           + "; ".join(f"{n.what} ({n.key})" for n in unmet))
    return out


def engines_markdown() -> str:
    """Return the per-engine table of docs/diagnosis-rules.md: head timing, process CPU, derived signals, causes.

    Causes are those the engine's own /metrics and records allow with metrics_url set (GPU causes also need a GPU
    source, serving_cpu_bound a watched process, whatever the engine).
    """
    rows = ["| engine | versions | response head | process CPU is | derived by sloguard | causes from its own "
            "signals |", "| --- | --- | --- | --- | --- | --- |"]
    for name in (*ENGINES, "openai"):
        cap = capability(name)
        target = {"name": name, "engine": name} | ({} if name == "openai" else {"metrics_url": "http://x/metrics"})
        cfg = Config.model_validate({"version": "sloguard/v1", "targets": [target], "gpu": {"nvml": "off"}})
        causes = [f"`{c}`" if ok else f"`{c}` (some releases)" for c, ok, _ in coverage(cfg, cfg.targets[0])
                  if ok is not False]
        derived = "; ".join(f"`{k}`: {v}" for k, v in cap.derived.items()) or "—"
        cpu = {"host": "host work (GPU engine)", "compute": "its compute",
               "build": "its compute on a CPU build, else host work (`device`)"}[cap.process_cpu]
        rows.append(f"| {name} | {cap.versions} | {cap.head.replace('_', ' ')} | {cpu} | {derived} | "
                    f"{', '.join(causes)} |")
    return "\n".join(rows) + "\n"
