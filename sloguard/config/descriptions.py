"""What each config key means: a table merged into `sloguard config schema` (editors show it on hover).

Keyed by model class name, then key as written in YAML; a class inherits its bases' entries. A test fails
for any schema property without a description, so a new key in spec.py needs its line here.
"""

from __future__ import annotations

from collections.abc import Mapping

_NAME = "unique name, used as a label value; letters, digits and _.:- (max 63 characters)"
_TARGET = "name of an entry in `targets`"
_DUR = "a duration such as 250ms, 30s, 5m, 1h30m, 28d"

DESCRIPTIONS: Mapping[str, Mapping[str, str]] = {
    "Config": {
        "version": "schema version of this file; must be sloguard/v1",
        "listen": "host:port for /metrics, the landing page and the APIs (\":9478\" = every interface); "
                  "changes take effect on restart; --web.listen-address overrides it",
        "state_dir": "directory of the SQLite store (probe results, alert state, notification outbox); must be "
                     "writable; changes take effect on restart",
        "evaluation_interval": f"how often SLOs and alerts are evaluated and /metrics is refreshed ({_DUR})",
        "log": "log format and level",
        "targets": "inference servers to scrape (/metrics) and probe (OpenAI-compatible API)",
        "probe_settings": "settings shared by every probe: prompt buckets, retention, history size",
        "probes": "synthetic streaming requests, each run every `interval` against one target",
        "slos": "service level objectives: latency quantiles, goodput, error rate, stage budgets",
        "alerts": "threshold alert rules over sloguard's own metrics (a PromQL subset, same text as the "
                  "generated Prometheus rules)",
        "notifiers": "where alerts go: slack, alertmanager, webhook or log; route with `match`",
        "gpu": "NVML GPU metrics and the optional torch GPU canary",
        "host": "psutil metrics of the serving processes on this host",
        "traces": "per-request server records (OTLP receiver for engine spans) and probe CLIENT span export",
        "diagnose": "the bottleneck verdict per SLO after each evaluation: where the time goes (stage) and why "
                    "(cause), docs/diagnosis.md",
        "builtin_alerts": "add sloguard's own alerts (source down, target down, stale probes, SLO burn rates, "
                          "GPU collection failing)",
        "runbook_url_template": "address of each built-in alert's runbook, its `runbook_url` annotation: "
                                "{alertname} is replaced by the alert's name (default: the pages in the repository, "
                                "docs/runbooks/<AlertName>.md; your docs site: https://docs.example.com/sloguard/"
                                "runbooks/{alertname}/); an SLO's own runbook_url wins for its burn alerts; \"\" "
                                "leaves the annotation out",
        "reports": "release identities recorded with every probe result, and an automatic before/after "
                   "regression report after each release change",
        "discovery": "where replicas come from at run time: Prometheus file_sd, http_sd or Kubernetes pods / "
                     "EndpointSlices (docs/kubernetes.md)",
        "services": "targets served by several replicas: probes hit the service's api_url, every replica's "
                    "/metrics is scraped (series keep a `replica` label), server SLOs add the replicas up",
        "ha": "running two or more sloguard replicas without double pages: Alertmanager deduplication, or a "
              "leader elected through a Kubernetes Lease or a lock file",
    },
    "DiscoverySpec": {
        "name": _NAME + "; the `config` label of sloguard_sd_* and what services[].discovery names",
        "file_sd": "read Prometheus file_sd target groups from files",
        "http_sd": "fetch Prometheus http_sd target groups from a URL",
        "kubernetes": "watch pods or EndpointSlices through the Kubernetes API (list, then watch)",
        "scheme": "scheme of each discovered target's /metrics URL (http or https)",
        "metrics_path": "path of each discovered target's /metrics URL (a __metrics_path__ label overrides it)",
    },
    "HTTPSDSpec": {
        "refresh_interval": f"how often the full list is fetched ({_DUR}); on failure the last good list is kept",
        "timeout": f"deadline of one fetch ({_DUR})",
        "token_env": "environment variable holding the Bearer token",
        "max_body_bytes": "largest answer read; a larger one fails the refresh",
    },
    "KubernetesSDSpec": {
        "role": "pod: the pods themselves; endpointslice: the endpoints of a Service's EndpointSlices",
    },
    "HASpec": {
        "lease_name": "name of the coordination.k8s.io/v1 Lease (mode lease)",
        "kubeconfig": "a kubeconfig file for the Lease (default: in-cluster service account)",
    },
    "ReplicaSpec": {
        "name": "the `replica` label value of this replica's series",
        "metrics_url": "this replica's own /metrics URL",
    },
    "ServiceSpec": {
        "replicas": "static replicas (name and metrics_url each)",
        "max_replicas": "most replicas one service takes; more discovered ones are dropped and counted",
    },
    "LogSpec": {
        "format": "logfmt (key=value) or json, one line per event; secrets are redacted",
        "level": "lowest level logged: debug, info, warning or error",
    },
    "TargetSpec": {
        "name": _NAME + "; the `target` label",
        "engine": "the server's /metrics dialect: vllm, sglang, tgi, triton, llamacpp, trtllm; auto detects it "
                  "from the scrape; openai = probe-only (no /metrics)",
        "metrics_url": "the engine's /metrics (http://, https:// or file://); omit to only probe",
        "api_url": "OpenAI-compatible base URL that probes call (e.g. http://10.0.0.5:8000); omit to only scrape",
        "model": "model name probes send; also the `model` label when the engine reports none",
        "api_key_file": "file holding the API key probes send as a Bearer token (never write the key inline)",
        "api_key_env": "environment variable holding the API key (instead of api_key_file)",
        "scrape_interval": f"how often /metrics is scraped ({_DUR})",
        "scrape_timeout": f"deadline of one scrape; must be shorter than scrape_interval ({_DUR})",
        "max_body_bytes": "larger /metrics bodies are refused and the target reported down (bytes)",
    },
    "PromptSpec": {
        "tokens": "approximate prompt length in tokens (the simulator and most tokenizers: ~4 bytes a token)",
        "weight": "relative weight of this prompt in the mix",
    },
    "ProbeSpec": {
        "name": _NAME + "; the `probe` label",
        "target": _TARGET + " with an api_url",
        "api": "request format: chat (/v1/chat/completions), completions (/v1/completions), tgi or triton",
        "model": "model name to request (default: the target's model)",
        "interval": f"time between requests of this probe ({_DUR})",
        "timeout": f"deadline of one request; must be shorter than interval; the connection is closed on "
                   f"timeout ({_DUR})",
        "max_tokens": "output tokens to request per probe",
        "ignore_eos": "ask the server to generate max_tokens even past end-of-sequence (vLLM, SGLang)",
        "prompts": "the prompt mix: each request draws one by weight",
    },
    "ProbeSettings": {
        "prompt_buckets": "bucket name -> upper bound in prompt tokens (inclusive); larger prompts are 'long'; "
                          "the prompt_bucket label",
        "retention": f"how long probe results stay in the store; keep it >= the longest SLO window ({_DUR})",
        "history_size": "recent probe results kept for /debug/probes (failures are kept longer)",
    },
    "ObjectiveSpec": {
        "metric": "ttft, ttfot, itl, tpot, e2e (probe or server) or queue, prefill, decode (server only)",
        "percentile": "the percentile as a number between 0 and 100, e.g. 95 for p95 or 99.9",
        "threshold": f"the percentile must stay at or below this ({_DUR})",
    },
    "GoodputSpec": {
        "ttft": f"a good request's time to first token is at most this ({_DUR})",
        "tpot": f"a good request's time per output token is at most this ({_DUR})",
        "e2e": f"a good request's end-to-end time is at most this ({_DUR})",
        "itl": f"a good request's worst inter-token latency is at most this ({_DUR})",
        "target": "share of requests that must be good (succeeded and met every threshold), e.g. 0.99",
    },
    "ErrorRateSpec": {
        "target": "the share of requests that must succeed, e.g. 0.999",
    },
    "SLOSpec": {
        "name": _NAME + "; the `slo` label",
        "target": _TARGET,
        "source": "probe: the client's view, per probe request; server: the engine's own histograms",
        "probe": "only this probe's requests (default: every probe of the target)",
        "objectives": "latency objectives: metric, percentile, threshold",
        "goodput": "per-request thresholds a request must all meet to be good, and the share that must be",
        "error_rate": "the share of requests that must succeed",
        "error_budget_window": f"the SLO window the error budget is measured over ({_DUR})",
        "budgets": f"per-stage p95 latency budgets: connect, ttft, queue, prefill, decode, network, e2e ({_DUR})",
        "segment_by": "prompt_bucket: also export the windowed series per prompt-length bucket",
        "runbook_url": "link put into this SLO's alerts and shown on the landing page",
        "dashboard_url": "link put into this SLO's alerts and shown on the landing page",
    },
    "AlertSpec": {
        "name": "alert name: letters, digits and _ (the alertname label)",
        "expr": "`metric{matchers} op number` over sloguard's own metrics, e.g. "
                "sloguard_slo_burn_rate{slo=\"chat\",window=\"1h\"} > 14.4",
        "for": f"the condition must hold this long before the alert fires ({_DUR}; 0s = at once)",
        "keep_firing_for": f"keep firing this long after the condition clears ({_DUR})",
        "severity": "info, warning, ticket, page or critical (the severity label; notifiers match on it)",
        "summary": "one-line text; {{ $labels.x }} and {{ $value }} are filled in",
        "description": "longer text; {{ $labels.x }} and {{ $value }} are filled in",
        "runbook_url": "link sent with the alert",
        "labels": "extra labels on the alert (routing, ownership)",
        "annotations": "extra annotations sent with the alert",
    },
    "NotifierBase": {
        "name": _NAME,
        "type": "slack, alertmanager, webhook, or log (alias console: the daemon's log)",
        "match": "label -> allowed values; an alert is sent here only if every listed label matches "
                 "(empty: every alert)",
        "group_by": "alerts with the same values of these labels are sent together",
        "group_wait": f"wait this long for more alerts of a new group before the first message ({_DUR})",
        "group_interval": f"wait this long before sending a changed group again ({_DUR})",
        "repeat_interval": f"re-send a still-firing group after this long ({_DUR})",
        "send_resolved": "also send a message when the alerts resolve",
        "max_delivery_age": f"a notification undelivered for this long is given up, logged, counted as expired "
                            f"and alerted on ({_DUR})",
    },
    "SlackNotifierSpec": {
        "token_file": "file holding a bot token (xoxb-...) for chat.postMessage / chat.update",
        "token_env": "environment variable holding the bot token",
        "webhook_url_file": "file holding an incoming-webhook URL (instead of a token: no message updates)",
        "webhook_url_env": "environment variable holding the incoming-webhook URL",
        "channel": "channel to post to with a bot token, e.g. #llm-oncall",
        "api_url": "Slack Web API base URL (change only for a proxy or a test double)",
        "dashboard_url": "link added to every message",
    },
    "AlertmanagerNotifierSpec": {
        "url": "Alertmanager base URL, e.g. http://alertmanager:9093 (alerts go to /api/v2/alerts)",
        "password_file": "file holding the basic-auth password",
        "password_env": "environment variable holding the basic-auth password",
        "username": "basic-auth user name",
        "resend_interval": f"re-send firing alerts this often with endsAt ahead, as Prometheus does ({_DUR})",
        "resolved_resend_for": f"keep re-sending a resolved alert for this long ({_DUR})",
    },
    "WebhookNotifierSpec": {
        "url": "URL that receives Alertmanager-format JSON POSTs (one without secrets in it)",
        "url_with_secret_file": "file holding a URL that contains a secret (token in the path or query)",
        "url_with_secret_env": "environment variable holding a URL that contains a secret",
        "timeout": f"deadline of one delivery attempt ({_DUR})",
    },
    "LogNotifierSpec": {},
    "CanarySpec": {
        "enabled": "run the torch GPU canary (GEMM, copy bandwidth, a tiny decoder) in a subprocess",
        "interval": f"time between canary runs, stretched to keep within duty_cycle ({_DUR})",
        "device": "auto, cpu, cuda or cuda:N",
        "timeout": f"a run is killed after this long ({_DUR})",
        "duty_cycle": "at most this share of GPU time goes to the canary (0.01 = 1%)",
        "quiet_threshold": "other work's SM share above which the GPU counts as busy (0..1)",
        "quiet_gap": f"start a run once the GPU was quiet this long ({_DUR})",
        "max_wait": f"or after this long without a quiet gap; such a run is contended: exported, not judged or "
                    f"baselined ({_DUR})",
        "poll": f"activity sampling period before and during a run ({_DUR})",
        "baseline_runs": "the baseline is the median of this GPU's last N uncontended healthy runs",
    },
    "GPUSpec": {
        "nvml": "auto: NVML metrics where an NVIDIA driver exists, quiet elsewhere; on: report an error without "
                "one; off: no NVML",
        "interval": f"how often NVML is read ({_DUR})",
        "pcie": "also read PCIe throughput (about 20 ms per GPU per collection)",
        "canary": "the optional torch GPU canary",
        "gpm": "read SM, tensor and DRAM activity through GPM on Hopper and newer (absent elsewhere)",
    },
    "TracesSpec": {
        "receiver": "OTLP/HTTP receiver for engine spans (needed by server_records: otlp); off when absent",
        "export": "export probe CLIENT spans over OTLP/HTTP; off when absent",
    },
    "SpanExportSpec": {
        "forward_engine_spans": "also send the joined engine spans to the same endpoint",
        "timeout": f"deadline of one export request ({_DUR})",
    },
    "ProcessSpec": {
        "name": _NAME + "; the `process` label",
        "target": _TARGET + " this process serves (for cold-start counting)",
        "process_name": "match processes by name (as in `ps -o comm`)",
        "cmdline_regex": "match processes whose command line matches this regular expression",
        "pid_file": "read the process id from this file",
    },
    "HostSpec": {
        "interval": f"how often process metrics are read ({_DUR})",
        "processes": "serving processes to watch (CPU, RSS, threads, open files, cold starts)",
    },
}


def describe(bases: list[str], key: str) -> str | None:
    """Return the description of `key` for a model whose class and base class names are `bases` (MRO order)."""
    for name in bases:
        text = DESCRIPTIONS.get(name, {}).get(key)
        if text is not None:
            return text
    return None
