"""Generate sloguard's Grafana dashboards from one table of panels and queries.

Run `python dashboards/build.py` after editing the tables; `--check` exits 1 when a JSON file is stale.
The JSON works both for import and for file provisioning unedited: the data source is a `datasource`
template variable (no `${DS_*}` inputs), every panel and query points at `${datasource}`, and each
dashboard has a fixed `uid`. Each panel names what it needs to show data (`requires`): "" (a running
sloguard with a target and a probe), "fault" (only while something is wrong), "gpu" (an NVIDIA GPU),
"gpu_fault" (a GPU fault: XID). tests/e2e/test_dashboards_prometheus.py runs every query.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 42  # the default of @grafana/schema 13 (Grafana 12.2+); tests/unit/deploy checks it
DS: dict[str, str] = {"type": "prometheus", "uid": "${datasource}"}
HERE = Path(__file__).resolve().parent
SEL_PROBE = 'target=~"$target",model=~"$model"'
SEL_SLO = 'slo=~"$slo"'
SEL_SLO_W = 'slo=~"$slo",window="$window"'
# Rate window of everything probes feed (probe histograms and counters, judged SLO requests). Probes run
# every 30 s by default, so $__rate_interval (4 scrape intervals, ~1m) holds about two results: a quantile
# of two is noise and a window with none is a gap (NaN). 5m holds ~10 per target; the prompt-length
# buckets of a mixed probe get fewer still, so do not go lower.
PROBE_WINDOW = "5m"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # Grafana panel plugin id: timeseries, stat, gauge, bargauge, table; or "row" (a section header)
    queries: tuple[Query, ...]
    unit: str = "s"
    requires: str = ""
    description: str = ""
    width: int = 12
    height: int = 8
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: tuple[Panel, ...]


def _quantiles(metric: str, by: str = "") -> tuple[Query, ...]:
    """Return p50/p95/p99 of a probe histogram, from bucket rates (aggregatable across instances)."""
    keys = f"{by}, le" if by else "le"
    return tuple(
        Query(
            f"histogram_quantile({q}, sum by ({keys}) "
            f"(rate(sloguard_probe_{metric}_seconds_bucket{{{SEL_PROBE}}}[{PROBE_WINDOW}])))",
            f"p{round(q * 100)}" + (f" {{{{{by}}}}}" if by else ""),
        )
        for q in (0.5, 0.95, 0.99)
    )


def _by_bucket(metric: str) -> tuple[Query, ...]:
    return (Query(
        f"histogram_quantile(0.95, sum by (prompt_bucket, le) "
        f"(rate(sloguard_probe_{metric}_seconds_bucket{{{SEL_PROBE}}}[{PROBE_WINDOW}])))",
        "p95 {{prompt_bucket}}",
    ),)


def _gpu(metric: str, legend: str = "GPU {{index}} {{name}}") -> Query:
    return Query(f"{metric} * on (uuid) group_left (index, name) sloguard_gpu_info", legend)


def _row(title: str) -> Panel:
    return Panel(title, "row", (), width=24, height=1)


def _server(stage: str) -> Query:
    return Query(
        f'sloguard_server_{stage}_seconds{{{SEL_PROBE},quantile="0.95",window="1m"}}', f"server {stage} p95"
    )


SLO_OVERVIEW = Dashboard("sloguard-slo-overview", "sloguard / SLO overview",
    "Objectives against actuals, goodput, error budget and burn rates per SLO, and what is firing.", (
    Panel("SLO state", "stat", (Query(f"sloguard_slo_state{{{SEL_SLO}}} == 1",
          "{{slo}}: {{state}} ({{severity}})"),), "none", width=24, height=3, options={"textMode": "name"},
          description="Each SLO's state over its breach window and the severity its firing alerts give it: the "
          "same value the status page, `sloguard status` and notifications show (the incident model)."),
    Panel("Goodput ratio", "stat", (Query(f"sloguard_slo_goodput_ratio{{{SEL_SLO_W},prompt_bucket=\"\"}}",
          "{{slo}}"),), "percentunit", width=6, height=5,
          description="Share of requests over $window that succeeded and met every goodput threshold."),
    Panel("Error budget remaining", "gauge", (Query(f"sloguard_slo_error_budget_remaining_ratio{{{SEL_SLO}}}",
          "{{slo}} {{sli}} {{metric}}"),), "percentunit", width=6, height=5,
          description="Per budget (sli=availability: failed requests; sli=latency: requests not good): "
          "1 - bad / ((1 - objective) x the requests the whole SLO window is expected to hold); negative when "
          "overspent."),
    Panel("Probe success ratio", "stat", (Query(
          'sum by (target) (rate(sloguard_probe_requests_total{target=~"$target",outcome=~"success|empty"}'
          f'[{PROBE_WINDOW}])) / sum by (target) (rate(sloguard_probe_requests_total{{target=~"$target"}}'
          f'[{PROBE_WINDOW}]))', "{{target}}"),), "percentunit", width=6, height=5),
    Panel("Firing alerts", "stat", (Query('count by (alertname) (sloguard_alerts{alertstate="firing"} > 0)',
          "{{alertname}}"),), "none", requires="fault", width=6, height=5,
          description="Alerts firing in sloguard's own engine (the same rules as alerts/ for Prometheus)."),
    Panel("Objectives vs actual", "timeseries", (
          Query(f'sloguard_slo_quantile_seconds{{{SEL_SLO_W},prompt_bucket=""}}',
                "{{slo}} {{metric}} p{{quantile}}"),
          Query(f"sloguard_slo_objective_seconds{{{SEL_SLO}}}", "objective {{slo}} {{metric}} p{{quantile}}")),
          description="Each objective's quantile over $window against its threshold; where requests ended "
          "before the metric's event could move it, the value is a lower bound and the objective is missed."),
    Panel("Goodput vs target", "timeseries", (
          Query(f'sloguard_slo_goodput_ratio{{{SEL_SLO_W},prompt_bucket=""}}', "goodput {{slo}}"),
          Query(f"sloguard_slo_goodput_target_ratio{{{SEL_SLO}}}", "target {{slo}}")), "percentunit"),
    Panel("Data coverage", "stat", (Query(f"sloguard_slo_window_coverage_ratio{{{SEL_SLO}}}",
          "{{slo}} {{sli}} {{metric}}"),), "percentunit", width=6, height=5,
          description="Share of the SLO window the data behind each budget spans (from the stored data, so "
          "restarts keep it): a budget based on 2 h of a 1 d window is mostly the schedule's expectation."),
    Panel("Burn rate by window", "timeseries", (Query(f"sloguard_slo_burn_rate{{{SEL_SLO}}}",
          "{{slo}} {{sli}} {{metric}} {{window}}"),), "x",
          description="1 spends the budget exactly over the SLO window; for a 28-30d window the page alerts "
          "fire at 14.4 (1h and 5m) and 6 (6h and 30m) when the long window's bad requests are significant "
          "(burn evidence >= 1); shorter SLO windows scale the windows (`sloguard check` prints them)."),
    Panel("Burn evidence", "timeseries", (Query(f"sloguard_slo_burn_evidence_ratio{{{SEL_SLO_W}}}",
          "{{slo}} {{sli}} {{metric}}"),), "x",
          description="Bad requests over $window divided by the fewest a burn alert needs there (one-sided "
          "binomial test at alpha 0.001 against the allowed bad ratio): below 1 the window is consistent with "
          "healthy operation and no burn alert on it fires."),
    Panel("Error ratio", "timeseries", (Query(f"sloguard_slo_error_ratio{{{SEL_SLO_W}}}",
          "{{slo}} {{sli}} {{metric}}"),), "percentunit"),
    Panel("Judged requests per second", "timeseries", (Query(
          f"sum by (slo, sli, good) (rate(sloguard_slo_requests_total{{{SEL_SLO}}}[{PROBE_WINDOW}]))",
          "{{slo}} {{sli}} good={{good}}"),), "reqps"),
    Panel("Requests ended before the metric's event", "timeseries", (Query(
          f'sloguard_slo_censored_requests{{{SEL_SLO_W},prompt_bucket=""}} > 0', "{{slo}} {{metric}}"),),
          "none", requires="fault",
          description="Timed out, reset or failed before the metric's event: counted as more than the time they "
          "ran, so a quantile among them is a lower bound (sloguard_slo_quantile_censored = 1) and misses."),
    Panel("Probe errors by outcome", "timeseries", (Query(
          'sum by (target, outcome) (rate(sloguard_probe_requests_total{target=~"$target",outcome!~"success|empty"}'
          f"[{PROBE_WINDOW}])) > 0", "{{target}} {{outcome}}"),), "reqps", requires="fault"),
))

LATENCY = Dashboard("sloguard-latency-breakdown", "sloguard / Latency breakdown",
    "Where the time goes: probe latencies, per-stage quantiles against budgets, network estimate, prompt sizes.", (
    Panel("Probe TTFT", "timeseries", _quantiles("ttft"), width=8),
    Panel("Probe TPOT", "timeseries", _quantiles("tpot"), width=8),
    Panel("Probe E2E", "timeseries", _quantiles("e2e"), width=8),
    Panel("Probe ITL", "timeseries", _quantiles("itl"), width=8),
    Panel("Probe connect time", "timeseries", _quantiles("connect"), width=8),
    Panel("Probe time to first output token", "timeseries", _quantiles("ttfot"), width=8,
          description="First non-reasoning token; equals TTFT for models that do not reason."),
    Panel("Stage p95 vs budget", "timeseries", (
          Query(f'sloguard_stage_latency_seconds{{{SEL_SLO_W},quantile="0.95",prompt_bucket=""}}',
                "{{slo}} {{stage}} p95"),
          Query(f"sloguard_stage_budget_seconds{{{SEL_SLO}}}", "budget {{slo}} {{stage}}"))),
    Panel("Stage share of E2E (p50)", "bargauge", (Query(
          f'sloguard_stage_share_ratio{{{SEL_SLO_W},prompt_bucket=""}}', "{{slo}} {{stage}}"),), "percentunit",
          options={"displayMode": "gradient", "orientation": "horizontal"}),
    Panel("Probe vs server TTFT p95 and the network stage", "timeseries", (
          Query("histogram_quantile(0.95, sum by (target, le) (rate(sloguard_probe_ttft_seconds_bucket"
                f"{{{SEL_PROBE}}}[{PROBE_WINDOW}])))", "probe {{target}}"),
          Query(f'max by (target) (sloguard_server_ttft_seconds{{{SEL_PROBE},quantile="0.95",window="5m"}})',
                "server {{target}}"),
          Query(f'sloguard_stage_latency_seconds{{{SEL_SLO_W},stage="network",quantile="0.95",prompt_bucket=""}}',
                "network {{slo}} {{source}}")), width=24,
          description="Network per request: client TTFT − the server's own TTFT where a server record exists "
          "(source=request), else the time to the response head; never the difference of two quantiles."),
    Panel("Server stages p95", "timeseries", tuple(_server(s) for s in ("queue", "prefill", "decode", "e2e"))),
    Panel("Server TTFT and TPOT p95", "timeseries", (_server("ttft"), _server("tpot"), _server("itl"))),
    Panel("TTFT p95 by prompt-length bucket", "timeseries", _by_bucket("ttft")),
    Panel("E2E p95 by prompt-length bucket", "timeseries", _by_bucket("e2e")),
    _row("Stage budgets and owners"),
    Panel("Stage budget breach", "timeseries", (
          Query(f"sloguard_stage_budget_breach_ratio{{{SEL_SLO}}}", "breach {{slo}} {{stage}} ({{window}})"),
          Query(f"sloguard_stage_budget_evidence_ratio{{{SEL_SLO}}}", "evidence {{slo}} {{stage}}")), "x", width=16,
          description="Breach = stage p95 / budget over the budget's alert window while the requests over budget "
          "pass the burn alerts' evidence guard (evidence > 1), else at most 1; SloguardStageBudgetOverrun fires "
          "above 1 for the budget's `for`."),
    Panel("Stage owners", "table", (Query(f"sloguard_stage_budget_owner_info{{{SEL_SLO}}}",
          "{{slo}} {{stage}} {{owner}}"),), "none", width=8,
          description="Who fixes each budgeted stage: the `owner` label its alert carries for routing."),
    _row("Where the time goes and why (bottleneck verdict)"),
    Panel("Verdict history", "state-timeline", (Query(
          f"sloguard_bottleneck_info{{{SEL_SLO}}} == 1", "{{slo}}: {{stage}} / {{cause}}"),), "none", width=24,
          description="The bottleneck verdict per SLO over time: stage (network, queue, prefill, decode) and cause "
          "(docs/diagnosis.md); none/none while no objective is breached, unknown when the evidence names no cause.",
          options={"mergeValues": True, "showValue": "never", "rowHeight": 0.8}),
    Panel("Stage excess over its own baseline (p95)", "timeseries", (Query(
          f"sloguard_stage_excess_seconds{{{SEL_SLO}}}", "{{slo}} {{stage}}"),), width=16,
          description="Each stage's p95 over the diagnosis window minus the stage's own healthy baseline: the "
          "stage that rose is where the time went."),
    Panel("Verdict confidence", "timeseries", (Query(
          f"sloguard_bottleneck_confidence_ratio{{{SEL_SLO}}}", "{{slo}}"),), "percentunit", width=8,
          description="Share of the whole's rise the stage explains, lowered where evidence was bounded or "
          "optional signals were missing; 0 for unknown."),
))

GPU_SERVING = Dashboard("sloguard-gpu-serving", "sloguard / GPU and serving health",
    "GPU utilisation, memory, power, throttling and errors; engine queue and KV cache; canary; sloguard itself.", (
    Panel("GPU utilisation", "timeseries", (_gpu("sloguard_gpu_utilization_ratio"),), "percentunit",
          requires="gpu", width=8),
    Panel("GPU memory used", "timeseries", (_gpu("sloguard_gpu_memory_used_bytes"),
          _gpu("sloguard_gpu_memory_total_bytes", "total GPU {{index}}"),
          _gpu("sloguard_gpu_memory_reserved_bytes", "driver-reserved GPU {{index}}")), "bytes", requires="gpu",
          width=8, description="Used as nvidia-smi memory.used (NVML memory v2): the driver's reserved memory apart."),
    Panel("GPU power", "timeseries", (_gpu("sloguard_gpu_power_watts"),), "watt", requires="gpu", width=8),
    Panel("GPU temperature", "timeseries", (_gpu("sloguard_gpu_temperature_celsius"),
          _gpu("sloguard_gpu_memory_temperature_celsius", "HBM GPU {{index}}")), "celsius", requires="gpu", width=8),
    Panel("GPU activity (GPM)", "timeseries", (
          _gpu("sloguard_gpu_sm_active_ratio", "SM active GPU {{index}}"),
          _gpu("sloguard_gpu_tensor_active_ratio", "tensor active GPU {{index}}"),
          _gpu("sloguard_gpu_dram_active_ratio", "DRAM bandwidth GPU {{index}}")), "percentunit", requires="gpu",
          width=16, description="Hopper and later (GPM): tensor-bound prefill shows tensor activity, memory-bound "
          "decode shows DRAM bandwidth; NVML utilisation cannot tell them apart. Absent on older GPUs."),
    Panel("Clock throttle reasons", "timeseries", (Query(
          "sloguard_gpu_clock_event_active * on (uuid) group_left (index) sloguard_gpu_info > 0",
          "GPU {{index}} {{reason}}"),), "none", requires="gpu", width=8,
          description="Active clock-event reasons (gpu_idle is normal when idle; thermal and power are not)."),
    Panel("ECC errors", "timeseries", (Query("sum by (uuid, type) (sloguard_gpu_ecc_errors_total)",
          "{{uuid}} {{type}}"),), "none", requires="gpu", width=8),
    Panel("XID events (1h)", "table", (Query("sum by (uuid, xid) (increase(sloguard_gpu_xid_events_total[1h])) > 0",
          "{{uuid}} XID {{xid}}"),), "none", requires="gpu_fault", width=8),
    Panel("Canary vs baseline", "timeseries", (Query("sloguard_canary_fraction_of_baseline", "{{test}}"),),
          "percentunit", requires="gpu", width=8,
          description="Achieved throughput of each canary test over this GPU's own baseline; below 0.9 is degraded."),
    Panel("Canary matmul throughput", "timeseries", (Query("sloguard_canary_matmul_flops", "{{device}}"),),
          "flops", requires="gpu", width=8),
    Panel("Canary: measured while shared", "timeseries", (
          Query("sloguard_canary_contention_ratio", "share of the run with other work {{gpu}}"),
          Query("sloguard_canary_contended", "contended {{gpu}}"),
          Query("sloguard_canary_degraded", "degraded {{gpu}}")), "none", requires="gpu", width=8,
          description="A contended run shared the GPU: its throughput is shown but not judged nor baselined."),
    Panel("KV cache usage", "timeseries", (Query(f"sloguard_server_kv_cache_usage_ratio{{{SEL_PROBE}}}",
          "{{target}}"),), "percentunit", width=8),
    Panel("Queue depth", "timeseries", (
          Query(f"sloguard_server_requests_waiting{{{SEL_PROBE}}}", "waiting {{target}}"),
          Query(f"sloguard_server_requests_running{{{SEL_PROBE}}}", "running {{target}}")), "none", width=8),
    Panel("Generation tokens per second", "timeseries", (Query(
          f'sloguard_server_generation_tokens_per_second{{{SEL_PROBE},window="1m"}}', "{{target}}"),),
          "none", width=8),
    Panel("Prefix cache hit ratio", "timeseries", (Query(
          f'sloguard_server_prefix_cache_hit_ratio{{{SEL_PROBE},window="1m"}}', "{{target}}"),),
          "percentunit", width=8),
    _row("Guardrails"),
    Panel("Prefix-cache hit ratio vs guardrail", "timeseries", (
          Query(f'sloguard_server_prefix_cache_hit_ratio{{{SEL_PROBE},window="5m"}}', "{{target}} {{model}}"),
          Query('sloguard_guardrail_threshold{target=~"$target",guardrail="prefix_cache_hit_ratio"}',
                "alert below {{target}}")), "percentunit", width=8,
          description="Prefix-cache hits / queried prompt tokens over 5m; the guardrail alerts below its "
          "threshold (0.6 by default) when enabled on the target."),
    Panel("Speculative decoding", "timeseries", (
          Query(f'sloguard_server_spec_decode_acceptance_ratio{{{SEL_PROBE},window="5m"}}',
                "accepted / draft tokens {{target}}"),
          Query(f'sloguard_server_spec_decode_acceptance_length{{{SEL_PROBE},window="5m"}} / 10',
                "tokens per draft step / 10 {{target}}")), "percentunit", width=8,
          description="Acceptance below 0.5 means the draft model is too different; the acceptance length "
          "(accepted + the bonus token per step, shown / 10) near 1 means no speed-up."),
    Panel("GPU busy vs queue", "timeseries", (
          Query('sloguard_server_gpu_activity_ratio{target=~"$target"}', "GPU activity {{target}} ({{source}})"),
          Query('sloguard_server_busy_gpu_empty_queue_ratio{target=~"$target"}', "busy GPU, empty queue {{target}}"),
          Query('sloguard_server_idle_gpu_deep_queue_ratio{target=~"$target"}', "idle GPU, deep queue {{target}}")),
          "percentunit", requires="gpu", width=8,
          description="Share of the window's evaluations in each contradiction: a busy GPU with nothing waiting "
          "(batching misconfiguration), an idle GPU with requests waiting (a stuck scheduler)."),
    Panel("Abort propagation: time to release", "timeseries", (
          Query('sloguard_check_seconds{check="abort",target=~"$target"}', "released after {{probe}}"),
          Query('sloguard_check_bound_seconds{check="abort",target=~"$target"}', "allowed {{probe}}")), width=8,
          description="From the client hanging up after the first token to the engine showing the request gone "
          "(its abort count or running gauge); for a leak, the time watched."),
    Panel("Oversized prompts: time to answer", "timeseries", (
          Query('sloguard_check_seconds{check="oversized_prompt",target=~"$target"}', "answered after {{probe}}"),
          Query('sloguard_check_bound_seconds{check="oversized_prompt",target=~"$target"}', "allowed {{probe}}"),
          Query('sloguard_check_status_code{check="oversized_prompt",target=~"$target"} / 1000',
                "HTTP status / 1000 {{probe}}")), width=8,
          description="A prompt over the context length should get a 4xx (0.4 here) fast; 0.2 is a 200 "
          "(accepted or silently truncated)."),
    Panel("Check outcomes (1h)", "table", (Query(
          'sum by (probe, check, outcome) (increase(sloguard_check_runs_total{target=~"$target"}[1h])) > 0',
          "{{probe}} {{outcome}}"),), "none", width=8,
          description="released / rejected pass; leaked, slow_release, accepted, truncated, hung, server_error, "
          "slow_reject fail; error means the check could not be made."),
    Panel("Sources up", "timeseries", (Query('sloguard_source_up{target=~"$target|"}', "{{source}} {{target}}"),),
          "none", width=8),
    Panel("Source run duration", "timeseries", (Query('sloguard_source_duration_seconds{target=~"$target|"}',
          "{{source}} {{target}}"),), width=8),
    Panel("Probe last success age", "timeseries", (Query("sloguard_probe_last_success_age_seconds",
          "{{probe}}"),), width=12),
    Panel("sloguard config, build and state store", "table", (
          Query("sloguard_config_last_reload_successful", "config reload ok"),
          Query("sloguard_build_info", "{{version}}"),
          Query("sloguard_store_up", "state store up (0: degraded, in memory)")), "none", width=12),
    _row("GPU health"),
    Panel("GPU health problems", "table", (Query(
          "sloguard_gpu_health_problem * on (uuid) group_left (index) sloguard_gpu_info == 1",
          "GPU {{index}} {{reason}}"),), "none", requires="gpu_fault", width=8,
          description="Sick-GPU signals that also hold on a busy GPU; each has a built-in alert with a runbook."),
    Panel("PCIe link: current vs max", "timeseries", (
          _gpu("sloguard_gpu_pcie_link_width", "width GPU {{index}}"),
          _gpu("sloguard_gpu_pcie_link_max_width", "max width GPU {{index}}"),
          _gpu("sloguard_gpu_pcie_link_generation", "gen GPU {{index}}"),
          _gpu("sloguard_gpu_pcie_link_max_generation", "max gen GPU {{index}}")), "none", requires="gpu", width=8,
          description="A width below max is a fault; the generation steps down when idle and is judged only busy."),
    Panel("Remapped memory rows", "timeseries", (
          Query("sum by (uuid, cause) (sloguard_gpu_remapped_rows_total)", "{{uuid}} {{cause}}"),
          Query("sloguard_gpu_row_remap_pending", "pending {{uuid}}"),
          Query("sloguard_gpu_row_remap_failure", "failure {{uuid}}")), "none", requires="gpu", width=8),
    Panel("Clocks held down, by policy", "timeseries", (Query(
          "sum by (uuid, policy) (rate(sloguard_gpu_violation_seconds_total[$__rate_interval]))",
          "{{uuid}} {{policy}}"),), "percentunit", requires="gpu", width=8,
          description="Share of time each policy (power, thermal, ...) kept clocks below the requested clocks."),
    Panel("SM clock vs max", "timeseries", (_gpu("sloguard_gpu_sm_clock_hertz", "SM GPU {{index}}"),
          _gpu("sloguard_gpu_sm_clock_max_hertz", "max GPU {{index}}")), "hertz", requires="gpu", width=8),
    Panel("PCIe replays and NVLink errors", "timeseries", (
          Query("sum by (uuid) (increase(sloguard_gpu_pcie_replays_total[1h]))", "PCIe replays {{uuid}}"),
          Query("sum by (uuid, type) (increase(sloguard_gpu_nvlink_errors_total[1h])) > 0",
                "NVLink {{type}} {{uuid}}")),
          "none", requires="gpu_fault", width=8, description="Per hour; NVLink only on GPUs that have it."),
))

DASHBOARDS: dict[str, Dashboard] = {
    "slo-overview.json": SLO_OVERVIEW,
    "latency-breakdown.json": LATENCY,
    "gpu-serving.json": GPU_SERVING,
}


def _variable(name: str, label: str, query: str, *, include_all: bool = True) -> dict[str, Any]:
    return {
        "name": name, "label": label, "type": "query", "datasource": DS,
        "query": {"query": query, "refId": f"{name}-var"},
        "refresh": 2, "sort": 1, "multi": include_all, "includeAll": include_all,
        **({"allValue": ".*", "current": {"text": "All", "value": "$__all"}} if include_all else {}),
    }


VARIABLES: tuple[dict[str, Any], ...] = (
    {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
     "refresh": 1, "hide": 0},
    _variable("target", "Target", "label_values(sloguard_source_up, target)"),
    _variable("model", "Model", 'label_values({__name__=~"sloguard_probe_ttft_seconds_count|'
              'sloguard_server_requests_running",target=~"$target"}, model)'),
    _variable("slo", "SLO", "label_values(sloguard_slo_requests_total, slo)"),
    _variable("window", "Window", 'label_values(sloguard_slo_goodput_ratio{slo=~"$slo"}, window)',
              include_all=False) | {"current": {"text": "5m", "value": "5m"}},
)


def _panel_json(p: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    if p.kind == "row":
        return {"id": pid, "type": "row", "title": p.title, "collapsed": False, "panels": [],
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}}
    targets = [{"datasource": DS, "expr": q.expr, "legendFormat": q.legend or "__auto", "range": True,
                "refId": chr(ord("A") + i)} for i, q in enumerate(p.queries)]
    if p.kind == "table":
        for t in targets:
            t |= {"instant": True, "range": False, "format": "table"}
    return {
        "id": pid, "type": p.kind, "title": p.title, "description": p.description, "datasource": DS,
        "gridPos": {"h": p.height, "w": p.width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
        "options": p.options, "targets": targets,
    }


def render(d: Dashboard) -> dict[str, Any]:
    """Return the Grafana JSON model of one dashboard, panels packed left to right in 24 columns."""
    panels, x, y, row_h = [], 0, 0, 0
    for pid, p in enumerate(d.panels, start=1):
        if x + p.width > 24 or p.kind == "row":
            x, y, row_h = 0, y + row_h, 0
        panels.append(_panel_json(p, pid, x, y))
        x, row_h = x + p.width, max(row_h, p.height)
    return {
        "uid": d.uid, "title": d.title, "description": d.description, "tags": ["sloguard", "llm", "slo"],
        "schemaVersion": SCHEMA_VERSION, "version": 1, "editable": True, "graphTooltip": 1,
        "time": {"from": "now-3h", "to": "now"}, "refresh": "30s", "timezone": "browser",
        "templating": {"list": list(VARIABLES)}, "annotations": {"list": []}, "links": [], "panels": panels,
    }


def text(d: Dashboard) -> str:
    """Return the JSON file content for one dashboard (stable: sorted keys, two-space indent)."""
    return json.dumps(render(d), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    """Write the dashboards next to this script; with --check only report stale files (exit 1)."""
    stale = [name for name, d in DASHBOARDS.items()
             if not (HERE / name).exists() or (HERE / name).read_text() != text(d)]
    if "--check" in argv:
        for name in stale:
            print(f"stale: dashboards/{name} (run python dashboards/build.py)", file=sys.stderr)
        return 1 if stale else 0
    for name in stale:
        (HERE / name).write_text(text(DASHBOARDS[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
