"""Workload: prompt sizing, weighted choice, buckets, traceparent; jobs built from the config."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from sloguard.config.spec import Config
from sloguard.probes.job import ProbeJob, jobs_from_config
from sloguard.probes.workload import bucket_for, filler, pick_prompt, traceparent

BUCKETS = (("short", 256), ("medium", 2048))


@pytest.mark.parametrize("tokens", [1, 16, 64, 256, 4096])
def test_filler_is_about_one_word_per_token(tokens: int) -> None:
    text = filler(tokens, "deadbeef")
    assert abs(len(text.split()) - tokens) <= 12
    assert text == filler(tokens, "deadbeef")  # deterministic
    assert text.startswith("deadbeef ")


@pytest.mark.parametrize(("tokens", "bucket"), [(1, "short"), (256, "short"), (257, "medium"), (2048, "medium"),
                                                 (2049, "long"), (10**6, "long")])
def test_bucket_edges_are_inclusive(tokens: int, bucket: str) -> None:
    assert bucket_for(tokens, BUCKETS) == bucket
    assert bucket_for(tokens, tuple(reversed(BUCKETS))) == bucket


def test_pick_prompt_follows_weights_and_varies_nonce() -> None:
    job = ProbeJob(name="p", target="t", api="chat", url="u", model="m", prompts=((64, 3.0), (4000, 1.0)),
                   prompt_buckets=BUCKETS)
    rng = random.Random(1)
    picks = [pick_prompt(job, rng) for _ in range(4000)]
    counts = Counter(p.tokens for p in picks)
    assert 2800 < counts[64] < 3200
    assert {p.bucket for p in picks if p.tokens == 4000} == {"long"}
    assert len({p.text.split()[0] for p in picks}) > 3900  # fresh nonce: no prefix-cache hits between probes


def test_traceparent_format() -> None:
    header, trace_id = traceparent()
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", header)
    assert header.split("-")[1] == trace_id
    assert traceparent()[1] != trace_id


def _cfg() -> Config:
    return Config.model_validate({
        "version": "sloguard/v1",
        "targets": [{"name": "a", "api_url": "http://h:8000/", "model": "llama"}, {"name": "b"}],
        "probe_settings": {"prompt_buckets": {"medium": 1000, "short": 100}},
        "probes": [{"name": "p1", "target": "a", "interval": "10s", "prompts": [{"tokens": 50, "weight": 2}]},
                   {"name": "p2", "target": "a", "api": "tgi", "model": "other"}],
    })


def test_jobs_from_config() -> None:
    p1, p2 = jobs_from_config(_cfg(), {"a": "sk-hidden"})
    assert (p1.url, p1.model, p1.interval, p1.prompts, p1.api_key) == ("http://h:8000", "llama", 10.0,
                                                                     ((50, 2.0),), "sk-hidden")
    assert p1.prompt_buckets == (("short", 100), ("medium", 1000))
    assert (p2.api, p2.model) == ("tgi", "other")
    assert "sk-hidden" not in repr(p1)


def test_jobs_from_config_needs_api_url() -> None:
    cfg = _cfg().model_copy(update={"probes": [_cfg().probes[0].model_copy(update={"target": "b"})]})
    with pytest.raises(ValueError, match=r"probes\[0\]\.target: target 'b' has no api_url"):
        jobs_from_config(cfg, {})
