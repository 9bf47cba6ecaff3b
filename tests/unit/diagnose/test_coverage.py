"""`sloguard check`'s diagnosis lines: per target, the causes it can name and the key that enables the rest."""

from __future__ import annotations

from sloguard.config.load import load_config_text
from sloguard.diagnose.coverage import lines

BASE = """version: sloguard/v1
gpu: {{nvml: "off"}}
targets:
  - {{name: llama, engine: {engine}, metrics_url: "http://127.0.0.1:8080/metrics", api_url: "http://127.0.0.1:8080"}}
{extra}"""


def test_the_minimal_llamacpp_config_names_what_its_signals_allow_and_says_what_enables_the_rest() -> None:
    out = lines(load_config_text(BASE.format(engine="llamacpp", extra="")))
    assert out[0] == ("diagnosis: target llama (llamacpp): can name engine_restart, long_prompts, capacity, network; "
                      "depends on what it finds: kv_cache_pressure")
    assert "cannot name serving_cpu_bound: needs the serving process watched (host.processes" in out[-1]
    assert any("cannot name gpu_throttled: needs a GPU source (gpu.nvml: on, or targets[].dcgm_url)" in line
               for line in out)


def test_a_watched_process_and_a_dcgm_page_enable_their_causes() -> None:
    extra = ("host: {processes: [{name: llama, target: llama, cmdline_regex: 'llama-server'}]}\n")
    dcgm = 'api_url: "http://127.0.0.1:8080", dcgm_url: "http://127.0.0.1:9400/metrics"}'
    text = BASE.format(engine="vllm", extra=extra).replace('api_url: "http://127.0.0.1:8080"}', dcgm)
    out = lines(load_config_text(text))
    assert out == ["diagnosis: target llama (vllm): can name engine_restart, gpu_unhealthy, gpu_throttled, "
                   "long_prompts, kv_cache_pressure, serving_cpu_bound, capacity, network"]


def test_an_auto_engine_depends_on_what_its_metrics_show() -> None:
    out = lines(load_config_text(BASE.format(engine="auto", extra="")))
    assert "depends on what it finds: long_prompts, kv_cache_pressure, capacity" in out[0]
