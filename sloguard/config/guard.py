"""Per-target guardrail settings (`targets[].guardrails`): the engine checks the seeds name, off by default.

Each key present turns that guardrail's built-in alert on for the target (`{}` takes the defaults, which
are the seeds' thresholds). The derived series (`sloguard_server_*`) are exported for every target whatever
is configured; only the alerts and the gated `sloguard_guardrail_value` need a guardrail here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from sloguard.config.units import Duration

# A guardrail reads counter deltas kept by the server windows, which reach back at least 15 minutes.
GuardWindow = Annotated[Duration, Field(ge=60, le=900)]
Severity = Literal["info", "warning", "ticket", "page", "critical"]


class GuardBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    window: GuardWindow = Field(default=300.0, description="the window the signal is computed over")
    for_: Duration = Field(default=600.0, ge=0, alias="for", description="how long the breach must last")
    severity: Severity = "warning"
    labels: dict[str, str] = Field(default_factory=dict, description="extra alert labels, e.g. owner: team")


class PrefixCacheGuard(GuardBase):
    below: float = Field(default=0.6, gt=0, le=1, description="alert while the hit ratio stays below this")
    min_tokens: float = Field(default=10_000, ge=1, description="prompt tokens the window must hold")


class SpecDecodeGuard(GuardBase):
    below: float = Field(default=0.5, gt=0, le=1, description="alert while accepted/draft tokens stays below")
    min_tokens: float = Field(default=1_000, ge=1, description="draft tokens the window must hold")


class _Contradiction(GuardBase):
    share: float = Field(default=0.9, gt=0, le=1,
                         description="alert while the condition held in at least this share of the window")
    min_readings: int = Field(default=5, ge=1, description="evaluations with both a GPU and a queue reading")


class BusyGpuEmptyQueueGuard(_Contradiction):
    gpu_at_least: float = Field(default=0.9, gt=0, le=1, description="GPU activity (SM active, else utilisation)")
    waiting_at_most: float = Field(default=0, ge=0, description="requests waiting in the engine")


class IdleGpuDeepQueueGuard(_Contradiction):
    gpu_at_most: float = Field(default=0.1, ge=0, lt=1, description="GPU activity (SM active, else utilisation)")
    waiting_at_least: float = Field(default=4, gt=0, description="requests waiting in the engine")


class GuardrailsSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prefix_cache_hit_ratio: PrefixCacheGuard | None = None
    spec_decode_acceptance: SpecDecodeGuard | None = None
    busy_gpu_empty_queue: BusyGpuEmptyQueueGuard | None = None
    idle_gpu_deep_queue: IdleGpuDeepQueueGuard | None = None

    def enabled(self) -> dict[str, GuardBase]:
        """Return the configured guardrails by name."""
        return {name: g for name in GUARDRAILS if isinstance(g := getattr(self, name), GuardBase)}


GUARDRAILS = ("prefix_cache_hit_ratio", "spec_decode_acceptance", "busy_gpu_empty_queue", "idle_gpu_deep_queue")
