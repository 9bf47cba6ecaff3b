"""Per-target guardrail settings (`targets[].guardrails`): the engine checks the seeds name, off by default.

Each key present turns that guardrail's built-in alert on for the target (`{}` takes the defaults, which
are the seeds' thresholds). The derived series (`sloguard_server_*`) are exported for every target whatever
is configured; only the alerts and the gated `sloguard_guardrail_value` need a guardrail here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sloguard.config.units import Duration

# A guardrail reads counter deltas kept by the server windows, which reach back at least 15 minutes.
GuardWindow = Annotated[Duration, Field(ge=60, le=900)]
Severity = Literal["info", "warning", "ticket", "page", "critical"]


class GuardBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    window: GuardWindow = Field(default=300.0, description="the window the signal is computed over")
    for_: Duration = Field(default=600.0, ge=0, alias="for", description="how long the breach must last")
    severity: Severity = Field(default="warning", description="the alert's severity label (notifier routing)")
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

    prefix_cache_hit_ratio: PrefixCacheGuard | None = Field(
        default=None, description="alert when the prefix-cache hit ratio stays low ({} = below 0.6 for 10m)")
    spec_decode_acceptance: SpecDecodeGuard | None = Field(
        default=None, description="alert when speculative-decoding acceptance stays low ({} = below 0.5 for 10m)")
    busy_gpu_empty_queue: BusyGpuEmptyQueueGuard | None = Field(
        default=None, description="alert when the GPU is busy while nothing waits (batching misconfiguration)")
    idle_gpu_deep_queue: IdleGpuDeepQueueGuard | None = Field(
        default=None, description="alert when the GPU idles while requests wait (a stuck scheduler)")

    def enabled(self) -> dict[str, GuardBase]:
        """Return the configured guardrails by name."""
        return {name: g for name in GUARDRAILS if isinstance(g := getattr(self, name), GuardBase)}


GUARDRAILS = ("prefix_cache_hit_ratio", "spec_decode_acceptance", "busy_gpu_empty_queue", "idle_gpu_deep_queue")


# Guardrail probe kinds (`probes[].kind`), with the defaults that differ from a latency probe's.
CheckKind = Literal["latency", "abort", "oversized_prompt"]
CHECK_DEFAULTS: dict[str, dict[str, object]] = {
    # a long generation that ignores EOS, so a request that is not cancelled keeps its slot for seconds
    "abort": {"max_tokens": 4096, "ignore_eos": True, "within": "2s"},
    "oversized_prompt": {"max_tokens": 16, "within": "1s"},
}
CHECK_APIS = ("chat", "completions")
CHECK_ONLY_KEYS = ("within", "context_length")


def check_defaults(data: object) -> object:
    """Fill a probe entry's kind-specific defaults (before validation); other keys are left as written."""
    if isinstance(data, dict) and data.get("kind") in CHECK_DEFAULTS:
        return {**CHECK_DEFAULTS[str(data["kind"])], **data}
    return data


def check_errors(kind: str, api: str, values: dict[str, object]) -> list[str]:
    """Return why a probe entry's kind and keys do not go together (empty when they do); None = not set."""
    if kind == "latency":
        return [f"{k}: only for kind abort or oversized_prompt" for k in CHECK_ONLY_KEYS if values.get(k) is not None]
    out = [] if api in CHECK_APIS else [f"api: kind {kind} sends OpenAI requests: use chat or completions"]
    if kind == "abort" and values.get("context_length") is not None:
        out.append("context_length: only for kind oversized_prompt")
    return out


# Stage budgets with owners (`slos[].budgets: {queue: {p95: 200ms, owner: inference-team}}`; `queue: 200ms`
# stays valid). The alert window must be one the SLO windows keep (sloguard.config.burnwindows.STANDARD_WINDOWS).
BUDGET_WINDOWS = (300.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)


class StageBudgetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    p95: Annotated[Duration, Field(gt=0)] = Field(description="the stage's p95 latency budget")
    owner: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@/ -]{0,62}$",
                              description="who fixes this stage: the `owner` label of its alert, for routing")
    for_: Duration = Field(default=600.0, ge=0, alias="for",
                           description="how long the overrun must last before the alert fires")
    window: Duration = Field(default=3600.0, description="the window the p95 is judged over: 5m, 30m, 1h, 2h, 6h "
                                                          "or 1d")
    severity: Severity = Field(default="warning", description="the alert's severity label (notifier routing)")

    @field_validator("window")
    @classmethod
    def _kept_window(cls, value: float) -> float:
        if value not in BUDGET_WINDOWS:
            raise ValueError("must be one of 5m, 30m, 1h, 2h, 6h, 1d (a window the SLO keeps)")
        return value


def budget_p95(value: float | StageBudgetSpec) -> float:
    """Return a budget's p95 seconds, whichever form it was written in."""
    return value.p95 if isinstance(value, StageBudgetSpec) else float(value)


def budget_spec(value: float | StageBudgetSpec) -> StageBudgetSpec:
    """Return a budget in its long form (the short form takes the defaults)."""
    return value if isinstance(value, StageBudgetSpec) else StageBudgetSpec.model_construct(p95=float(value))
