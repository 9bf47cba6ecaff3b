"""Built-in guardrail alerts as data, one per enabled guardrail and target; rules.py turns them into rules.

Every expression stays in the threshold subset over sloguard's own gated series
(`sloguard_guardrail_value{guardrail,target} OP threshold`), so the live engine and the generated
Prometheus rule read the same value, evidence guard included (the value is absent without enough evidence).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from sloguard.config.guard import GuardBase, budget_spec
from sloguard.config.runbooks import runbook_url
from sloguard.config.spec import Config
from sloguard.config.units import format_duration
from sloguard.guardrails.server import limit

VALUE = "sloguard_guardrail_value"
EVIDENCE = "sloguard_guardrail_evidence"


@dataclass(frozen=True)
class Kind:
    """What one guardrail's alert says: its name, comparison, summary (templated) and runbook line."""

    alert: str
    op: str
    what: str  # the value, in words, for the summary
    evidence: str  # what sloguard_guardrail_evidence counts for it
    runbook: str


GUARDRAIL_ALERTS: Mapping[str, Kind] = {
    "prefix_cache_hit_ratio": Kind(
        "SloguardPrefixCacheHitRatioLow", "<", "prefix-cache hit ratio", "prompt tokens",
        "Requests recompute prefixes they could reuse, so TTFT and GPU time grow. Check that prefix caching is on "
        "(vLLM --enable-prefix-caching, SGLang's radix cache, TensorRT-LLM enable_block_reuse), that requests "
        "sharing a prefix reach the same replica (prefix-aware or sticky routing), that prompts put the shared "
        "part first (no timestamp or user id before the system prompt), and that the KV cache is not evicting "
        "the working set (kv_cache_usage near 1, preemptions)."),
    "spec_decode_acceptance": Kind(
        "SloguardSpecDecodeAcceptanceLow", "<", "speculative-decoding acceptance (accepted / draft tokens)",
        "draft tokens",
        "The draft model is too different from the target model for this traffic: rejected drafts cost a "
        "verification step each and TPOT gets worse, not better. Check the draft matches the target's tokenizer "
        "and family (or fine-tune it on this traffic), lower num_speculative_tokens, or turn speculative "
        "decoding off for this workload (acceptance length near 1 means no speed-up)."),
    "busy_gpu_empty_queue": Kind(
        "SloguardBusyGPUEmptyQueue", ">=", "share of the window with a busy GPU and an empty queue",
        "evaluations with a GPU and a queue reading",
        "The GPU is busy although nothing waits: batching is misconfigured or the GPU is shared. Check "
        "max_num_seqs / max_num_batched_tokens (small, inefficient batches), chunked-prefill settings, eager mode "
        "(CUDA graphs off), and other processes on the GPU (sloguard_gpu_process_memory_bytes)."),
    "idle_gpu_deep_queue": Kind(
        "SloguardIdleGPUDeepQueue", ">=", "share of the window with an idle GPU and a deep queue",
        "evaluations with a GPU and a queue reading",
        "Requests wait while the GPU idles: the scheduler is stuck. Look for a KV cache that never frees (slots "
        "leaked by disconnected clients: the abort probe), a CPU-bound tokenizer or HTTP front end (CPU of the "
        "serving process), or a hung engine step (engine log); restart the engine if the queue does not move."),
}


@dataclass(frozen=True)
class GuardRule:
    """One built-in guardrail alert for one target, as plain data."""

    name: str
    expr: str
    for_: float
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    key: str


def _rule(target: str, name: str, guard: GuardBase, runbooks: str) -> GuardRule:
    kind = GUARDRAIL_ALERTS[name]
    threshold = limit(guard)
    window = format_duration(guard.window)
    sel = f"{{guardrail={json.dumps(name)},target={json.dumps(target)}}}"
    held = query(f"{EVIDENCE}{{target='{target}',guardrail='{name}'}}", 'printf "%.0f"')
    summary = (f'{kind.what} on {{{{ $labels.target }}}} {{{{ $labels.model }}}} is {{{{ $value | printf "%.3g" }}}} '
               f"over {window} (alert {kind.op} {threshold:g}; the window holds {held} {kind.evidence})")
    labels = {**guard.labels, "severity": guard.severity, "guardrail": name}
    return GuardRule(kind.alert, f"{VALUE}{sel} {kind.op} {threshold!r}", guard.for_, labels,
                     _annotations(summary, kind.runbook, runbooks, kind.alert), f"{kind.alert}:{target}")


def _annotations(summary: str, description: str, runbooks: str, alert: str) -> dict[str, str]:
    """Return an alert's annotations: its summary, what to do, and its runbook page (where the template is set)."""
    url = runbook_url(runbooks, alert)
    return {"summary": summary, "description": description, **({"runbook_url": url} if url else {})}


def query(selector: str, render: str) -> str:
    """Return the alert-template query that prints another series' value (sloguard.alerts.template subset)."""
    return f'{{{{ with query "{selector}" }}}}{{{{ . | first | value | {render} }}}}{{{{ end }}}}'



def guardrail_rules(cfg: Config) -> list[GuardRule]:
    """Return the alert of every guardrail enabled on a target, in config order."""
    return [_rule(t.name, name, guard, cfg.runbook_url_template)
            for t in cfg.targets for name, guard in t.guardrails.enabled().items()]


CHECK_METRIC = "sloguard_check_consecutive_failures"
FAIL_AFTER = 2  # failed verdicts in a row before a check alert fires: one busy moment is not a leak
CHECK_ALERTS: Mapping[str, Kind] = {
    "abort": Kind(
        "SloguardAbortNotPropagated", ">=", "GPU slots leak on client disconnect", "abort checks",
        "A client that went away did not stop its generation: its batch slot and KV cache stay busy until "
        "max_tokens (one seed's incident: 3 s of generation nobody read), so disconnect storms exhaust capacity. "
        "Check whatever sits between client and engine (a gateway or proxy that keeps the upstream stream open, "
        "e.g. nginx proxy_ignore_client_abort), the engine version's abort path (vLLM logs 'Aborted request'), "
        "and sloguard_check_seconds for how long the slot was held."),
    "oversized_prompt": Kind(
        "SloguardOversizedPromptMishandled", ">=", "prompts over the context length are mishandled",
        "oversized-prompt checks",
        "A prompt over the context length was accepted, silently truncated, left hanging, failed with a 5xx or "
        "rejected slowly, instead of a fast 4xx: clients get wrong answers or wait for nothing. Compare the "
        "gateway's limits with the engine's (vLLM --max-model-len, llama.cpp --ctx-size, TGI --max-input-tokens), "
        "turn off silent truncation (truncate_prompt_tokens), and make sure validation runs before queueing."),
}


def check_rules(cfg: Config) -> list[GuardRule]:
    """Return the built-in alert of every configured guardrail check probe (abort, oversized_prompt)."""
    out = []
    for p in cfg.probes:
        kind = CHECK_ALERTS.get(p.kind)
        if kind is None:
            continue
        sel = f"{{check={json.dumps(p.kind)},probe={json.dumps(p.name)}}}"
        last = query(f"sloguard_check_seconds{{probe='{p.name}'}}", "humanizeDuration")
        status = query(f"sloguard_check_status_code{{probe='{p.name}'}}", 'printf "%.0f"')
        evidence = (f"the last request ran on {last} after its client left" if p.kind == "abort" else
                    f"the last answer: HTTP {status} after {last}")
        summary = (f"{kind.what}: {{{{ $labels.target }}}} failed {{{{ $value }}}} {kind.evidence} in a row "
                   f"(probe {p.name}; {evidence}, allowed {format_duration(p.within or 0.0)})")
        out.append(GuardRule(kind.alert, f"{CHECK_METRIC}{sel} {kind.op} {FAIL_AFTER}", 0.0,
                             {"severity": "warning", "check": p.kind},
                             _annotations(summary, kind.runbook, cfg.runbook_url_template, kind.alert),
                             f"{kind.alert}:{p.name}"))
    return out


STAGE_ALERT = "SloguardStageBudgetOverrun"
STAGE_METRIC = "sloguard_stage_budget_breach_ratio"


def stage_rules(cfg: Config) -> list[GuardRule]:
    """Return one alert per SLO stage budget: its p95 over budget with the burn alerts' evidence, for `for`."""
    out = []
    for slo, stage, spec in ((s.name, str(stage), budget_spec(v)) for s in cfg.slos for stage, v in s.budgets.items()):
        window = format_duration(spec.window)
        sel = f"{{slo={json.dumps(slo)},stage={json.dumps(stage)},window={json.dumps(window)}}}"
        owner = f" (owner {spec.owner})" if spec.owner else ""
        summary = (f'SLO {slo} stage {stage}: p95 is {{{{ $value | printf "%.2f" }}}}x its '
                   f"{format_duration(spec.p95)} budget over {window}{owner}")
        description = (f"The {stage} stage's p95 stayed over its {format_duration(spec.p95)} budget for "
                       f"{format_duration(spec.for_)}, with more requests over it than healthy operation at the "
                       f"budget would give (the burn alerts' evidence guard). Look at where the time goes in the "
                       f"latency-breakdown dashboard; the stage's owner decides the fix.")
        labels = {"severity": spec.severity, "slo": slo, "stage": stage}
        if spec.owner:
            labels["owner"] = spec.owner
        out.append(GuardRule(STAGE_ALERT, f"{STAGE_METRIC}{sel} > 1", spec.for_, labels,
                             _annotations(summary, description, cfg.runbook_url_template, STAGE_ALERT),
                             f"{STAGE_ALERT}:{slo}:{stage}"))
    return out
