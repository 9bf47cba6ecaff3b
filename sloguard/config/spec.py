"""The `sloguard/v1` configuration schema: strict pydantic models, unknown keys rejected."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, ConfigDict, Discriminator, Field, Tag, model_validator

from sloguard.config.fleet import DiscoverySpec, HASpec, ServiceReplicas
from sloguard.config.guard import CheckKind, GuardrailsSpec, StageBudgetSpec, check_defaults, check_errors
from sloguard.config.notifiers import NotifierSpec
from sloguard.config.runbooks import DEFAULT_TEMPLATE
from sloguard.config.strict import Name, PositiveDuration, SecretSource, Strict
from sloguard.config.traces import TracesSpec
from sloguard.config.units import Duration

Engine = Literal["auto", "vllm", "sglang", "tgi", "triton", "llamacpp", "trtllm", "openai"]
LatencyMetric = Literal["ttft", "ttfot", "itl", "tpot", "e2e", "queue", "prefill", "decode"]
Stage = Literal["connect", "ttft", "queue", "prefill", "decode", "network", "e2e"]


class LogSpec(Strict):
    format: Literal["logfmt", "json"] = "logfmt"
    level: Literal["debug", "info", "warning", "error"] = "info"


def _no_userinfo(url: str) -> str:
    if urlsplit(url).password is not None or "@" in urlsplit(url).netloc:
        raise ValueError("credentials in the URL are not allowed (they would reach logs): use api_key_file")
    return url


class TargetSpec(SecretSource):
    name: Name
    engine: Engine = "auto"
    metrics_url: Annotated[str, AfterValidator(_no_userinfo)] | None = Field(
        default=None, pattern=r"^(https?://|file://).+")
    api_url: Annotated[str, AfterValidator(_no_userinfo)] | None = Field(default=None, pattern=r"^https?://.+")
    model: str | None = None
    api_key_file: str | None = None
    api_key_env: str | None = None
    scrape_interval: PositiveDuration = 15.0
    scrape_timeout: PositiveDuration = 10.0
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    server_records: Literal["otlp", "inband", "none"] = Field(
        default="inband",
        description="where the server's own per-request record comes from (docs/definitions.md): otlp = "
                    "engine spans sent to traces.receiver, inband = in the stream (vLLM per-request metrics, "
                    "llama.cpp timings), none = not used")
    # Per-scrape limits, as Prometheus's: a scrape over one is rejected whole (source down, reason = the limit).
    device: Literal["auto", "cpu", "gpu"] = Field(
        default="auto",
        description="where the engine computes: cpu = a CPU build (its process CPU is the model's work, never a "
                    "serving cause; CPU starvation is read as run-queue wait), gpu = GPU-backed (its process CPU is "
                    "the HTTP front and scheduling); auto: llama.cpp is cpu unless sloguard sees a GPU for the target, "
                    "every other engine gpu")
    sample_limit: int = Field(default=50_000, ge=0, description="most samples in one /metrics page; 0 = no limit")
    label_limit: int = Field(default=64, ge=0, description="most labels on one sample; 0 = no limit")
    label_value_length_limit: int = Field(default=1024, ge=0,
                                          description="most characters in one label value; 0 = no limit")
    series_limit: int = Field(default=5_000, ge=0,
                              description="most sloguard_server_* series this target may produce; 0 = no limit")
    guardrails: GuardrailsSpec = Field(default_factory=GuardrailsSpec,
                                       description="engine guardrail alerts for this target, off unless named "
                                                   "(docs/guardrails.md)")
    dcgm_url: Annotated[str, AfterValidator(_no_userinfo)] | None = Field(
        default=None, pattern=r"^(https?://|file://).+",
        description="an NVIDIA dcgm-exporter /metrics URL for the GPUs serving this target; its DCGM_FI_* fields "
                    "become the same sloguard_gpu_* series as NVML's, labelled with this target")
    labels: dict[Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]{0,62}$")], str] = Field(
        default_factory=dict,
        description="release labels recorded with every probe result (e.g. release: v0.11); a change is a "
                    "release boundary and starts a before/after report (see `reports`)")

    @model_validator(mode="after")
    def _scrapeable(self) -> TargetSpec:
        if self.engine == "openai" and self.metrics_url is not None:
            raise ValueError("engine 'openai' is probe-only and has no /metrics format: remove metrics_url or "
                             "name the engine (or auto)")
        return self


class ServiceSpec(ServiceReplicas, TargetSpec):
    """A target served by replicas: probes hit its api_url (the users' view), each replica's /metrics is scraped."""

    @model_validator(mode="after")
    def _replicas(self) -> ServiceSpec:
        if self.metrics_url is not None:
            raise ValueError("a service has no metrics_url of its own: list its replicas (replicas, discovery)")
        if not self.replicas and self.discovery is None:
            raise ValueError("needs replicas, discovery or both")
        return self


class PromptSpec(Strict):
    tokens: int = Field(gt=0, le=1_000_000)
    weight: float = Field(default=1.0, gt=0)


class ProbeSpec(Strict):
    name: Name
    target: Name
    api: Literal["chat", "completions", "tgi", "triton"] = "chat"
    model: str | None = None
    interval: PositiveDuration = 30.0
    timeout: PositiveDuration = 20.0
    max_tokens: int = Field(default=64, gt=0)
    ignore_eos: bool = False
    prompts: list[PromptSpec] = Field(default_factory=lambda: [PromptSpec(tokens=64)], min_length=1)
    max_events: int | None = Field(
        default=None, gt=0, le=100_000,
        description="SSE events one response may send before it fails as an event flood (default 4 x max_tokens + 64)",
    )
    kind: CheckKind = Field(default="latency", description="latency (a measured request), or a guardrail check: "
                            "abort (does a client disconnect free the slot?) or oversized_prompt (a fast 4xx?)")
    within: PositiveDuration | None = Field(default=None, description="abort: how long a disconnected request may "
                                            "keep generating (2s); oversized_prompt: how long the 4xx may take (1s)")
    context_length: int | None = Field(default=None, gt=0, description="oversized_prompt: the served context "
                                       "length in tokens (default: read from /v1/models, /props or /info)")

    @model_validator(mode="before")
    @classmethod
    def _kind_defaults(cls, data: Any) -> Any:
        return check_defaults(data)

    @model_validator(mode="after")
    def _kind_keys(self) -> ProbeSpec:
        errors = check_errors(self.kind, self.api, {"within": self.within, "context_length": self.context_length})
        if errors:
            raise ValueError("; ".join(errors))
        return self


class ProbeSettings(Strict):
    prompt_buckets: dict[str, int] = Field(
        default_factory=lambda: {"short": 256, "medium": 2048},
        description="bucket name -> upper bound in prompt tokens (inclusive); larger prompts are 'long'",
    )
    retention: PositiveDuration = 35 * 86400.0
    history_size: int = Field(default=200, gt=0)
    store_backlog: int = Field(
        default=20000, ge=0,
        description="probe results kept in memory (about 0.6 KiB each) while the state store cannot be written; "
                    "beyond it the oldest are dropped from the backlog, counted and logged",
    )


class ObjectiveSpec(Strict):
    metric: LatencyMetric
    percentile: float = Field(gt=0, lt=100)
    threshold: PositiveDuration


class GoodputSpec(Strict):
    ttft: PositiveDuration | None = None
    tpot: PositiveDuration | None = None
    e2e: PositiveDuration | None = None
    itl: PositiveDuration | None = None
    target: float = Field(gt=0, lt=1)


class ErrorRateSpec(Strict):
    target: float = Field(gt=0, lt=1, description="the share of requests that must succeed, e.g. 0.999")


def _budget_form(value: Any) -> str:
    return "budget-long" if isinstance(value, dict | StageBudgetSpec) else "budget-short"


# `queue: 200ms` or `queue: {p95: 200ms, owner: team}`; the form decides which errors a bad value gets.
StageBudget = Annotated[
    Annotated[PositiveDuration, Tag("budget-short")] | Annotated[StageBudgetSpec, Tag("budget-long")],
    Discriminator(_budget_form)]


class SLOSpec(Strict):
    name: Name
    target: Name
    source: Literal["probe", "server"] = "probe"
    probe: Name | None = None
    objectives: list[ObjectiveSpec] = Field(default_factory=list)
    goodput: GoodputSpec | None = None
    error_rate: ErrorRateSpec | None = None
    error_budget_window: PositiveDuration = 28 * 86400.0
    budgets: dict[Stage, StageBudget] = Field(default_factory=dict)
    segment_by: Literal["prompt_bucket"] | None = None
    runbook_url: str | None = None
    dashboard_url: str | None = None


class AlertSpec(Strict):
    name: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    expr: str
    for_: Duration = Field(default=0.0, alias="for", ge=0)
    keep_firing_for: Duration = Field(default=0.0, ge=0)
    severity: Literal["info", "warning", "ticket", "page", "critical"] = "warning"
    summary: str = ""
    description: str = ""
    runbook_url: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class CanarySpec(Strict):
    enabled: bool = False
    interval: PositiveDuration = 600.0
    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    timeout: PositiveDuration = 120.0
    duty_cycle: float = Field(default=0.01, gt=0, le=0.1)
    quiet_threshold: float = Field(default=0.05, ge=0, le=1)
    quiet_gap: Duration = Field(default=3.0, ge=0)
    max_wait: Duration = Field(default=60.0, ge=0)
    poll: PositiveDuration = 0.5
    baseline_runs: int = Field(default=5, ge=1, le=100)


class GPUSpec(Strict):
    nvml: Literal["auto", "on", "off"] = "auto"
    interval: PositiveDuration = 15.0
    pcie: bool = False
    canary: CanarySpec = Field(default_factory=CanarySpec)
    gpm: bool = True


class ProcessSpec(Strict):
    name: Name
    target: Name | None = None
    process_name: str | None = None
    cmdline_regex: str | None = None
    pid_file: str | None = None


class HostSpec(Strict):
    interval: PositiveDuration = 15.0
    processes: list[ProcessSpec] = Field(default_factory=list)


class DiagnoseSpec(Strict):
    enabled: bool = Field(default=True, description="decide a bottleneck verdict per SLO after every evaluation")
    window: PositiveDuration = Field(default=300.0, description="the recent window a verdict is judged on")
    baseline: PositiveDuration = Field(default=3600.0, description="how far back the healthy values go whose "
                                       "median is each stage's and signal's own baseline")
    restart_hold: PositiveDuration = Field(default=600.0, description="how long after an engine restart or a "
                                           "process cold start it explains a breach")


class ReportsSpec(Strict):
    enabled: bool = Field(default=True, description="record release boundaries and report before/after each")
    after: PositiveDuration = Field(default=3600.0, description="soak after a release boundary before its report")
    min_requests: int = Field(default=200, ge=20, description="probe results each side needs before the report "
                              "is made (it waits up to max_wait for them)")
    max_wait: PositiveDuration = Field(default=86400.0, description="make the report after this long even with "
                                       "fewer than min_requests (as long as each side has 20 successes)")
    baseline: PositiveDuration = Field(default=86400.0, description="how far before the boundary the baseline "
                                       "reaches (the previous release's results only)")
    warmup: Duration = Field(default=0.0, ge=0, description="results right after the boundary left out")
    identity_interval: PositiveDuration = Field(default=60.0, description="how often each target's identity "
                                                "(engine version, served models) is read")
    keep: int = Field(default=50, ge=1, description="reports kept under state_dir/reports (oldest deleted)")


class Config(Strict):
    version: Literal["sloguard/v1"]
    listen: str = Field(default=":9478", pattern=r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]*):\d{1,5}$")
    state_dir: str = "/var/lib/sloguard"
    evaluation_interval: PositiveDuration = 15.0
    log: LogSpec = Field(default_factory=LogSpec)
    targets: list[TargetSpec] = Field(default_factory=list)
    probe_settings: ProbeSettings = Field(default_factory=ProbeSettings)
    probes: list[ProbeSpec] = Field(default_factory=list)
    slos: list[SLOSpec] = Field(default_factory=list)
    alerts: list[AlertSpec] = Field(default_factory=list)
    notifiers: list[NotifierSpec] = Field(default_factory=list)
    gpu: GPUSpec = Field(default_factory=GPUSpec)
    host: HostSpec = Field(default_factory=HostSpec)
    builtin_alerts: bool = True
    runbook_url_template: str = Field(default=DEFAULT_TEMPLATE, pattern=r"^(|.*\{alertname\}.*)$")
    traces: TracesSpec = Field(default_factory=TracesSpec)
    diagnose: DiagnoseSpec = Field(default_factory=DiagnoseSpec)
    reports: ReportsSpec = Field(default_factory=ReportsSpec)
    discovery: list[DiscoverySpec] = Field(default_factory=list)
    services: list[ServiceSpec] = Field(default_factory=list)
    ha: HASpec = Field(default_factory=HASpec)

    @model_validator(mode="after")
    def _services_are_targets(self) -> Config:
        # Probes, SLOs and every per-target part address a service by name like a target: one list to read.
        if not self.services or any(isinstance(t, ServiceSpec) for t in self.targets):
            return self
        return self.model_copy(update={"targets": [*self.targets, *self.services]})
