"""ProbeJob: one configured probe, flattened from the config into a picklable value for the probe process."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sloguard.urls import api_root

if TYPE_CHECKING:  # the probe process unpickles jobs without importing pydantic
    from sloguard.config.spec import Config, ProbeSpec, TargetSpec

LONG_BUCKET = "long"


def default_max_events(max_tokens: int) -> int:
    """Return the event cap for a probe: engines send at most about one event per token, plus a few others."""
    return 4 * max_tokens + 64


@dataclass(frozen=True)
class ProbeJob:
    """Everything one probe needs to send requests; `api_key` is hidden from repr."""

    name: str
    target: str
    api: str
    url: str
    model: str
    max_tokens: int = 64
    ignore_eos: bool = False
    timeout: float = 20.0
    interval: float = 30.0
    prompts: tuple[tuple[int, float], ...] = ((64, 1.0),)
    prompt_buckets: tuple[tuple[str, int], ...] = (("short", 256), ("medium", 2048))
    api_key: str | None = field(default=None, repr=False)
    max_events: int = 1_000_000  # more events in one response end it as an event flood
    # Guardrail checks (sloguard.config.guard): the kind, its bound, the target's /metrics for the abort check
    # and the context length for the oversized-prompt check (0: read it from the server).
    kind: str = "latency"
    within: float = 0.0
    metrics_url: str = ""
    engine: str = "auto"
    context_length: int = 0

    @property
    def probe_key(self) -> str:
        """Return the PROBES entry that runs this job: its check kind, else its API."""
        return self.api if self.kind == "latency" else self.kind


def jobs_from_config(cfg: Config, secrets: Mapping[str, str]) -> list[ProbeJob]:
    """Build one job per configured probe; `secrets` maps target name -> API key.

    Raises ValueError naming the probe when its target is unknown or has no `api_url`.
    """
    targets = {t.name: t for t in cfg.targets}
    buckets = tuple(sorted(cfg.probe_settings.prompt_buckets.items(), key=lambda kv: kv[1]))
    return [_job(i, p, targets, buckets, secrets) for i, p in enumerate(cfg.probes)]


def _job(
    index: int,
    spec: ProbeSpec,
    targets: Mapping[str, TargetSpec],
    buckets: tuple[tuple[str, int], ...],
    secrets: Mapping[str, str],
) -> ProbeJob:
    target = targets.get(spec.target)
    if target is None:
        raise ValueError(f"probes[{index}].target: unknown target {spec.target!r}")
    if not target.api_url:
        raise ValueError(f"probes[{index}].target: target {spec.target!r} has no api_url")
    return ProbeJob(
        name=spec.name,
        target=spec.target,
        api=spec.api,
        url=api_root(target.api_url),
        model=spec.model or target.model or "",
        max_tokens=spec.max_tokens,
        ignore_eos=spec.ignore_eos,
        timeout=spec.timeout,
        interval=spec.interval,
        prompts=tuple((p.tokens, p.weight) for p in spec.prompts),
        prompt_buckets=buckets,
        api_key=secrets.get(spec.target),
        max_events=spec.max_events or default_max_events(spec.max_tokens),
        kind=spec.kind,
        within=spec.within or 0.0,
        metrics_url=target.metrics_url or "",
        engine=target.engine,
        context_length=spec.context_length or 0,
    )
