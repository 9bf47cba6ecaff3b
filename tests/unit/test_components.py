"""A reload reuses running sources whose settings are unchanged, so they keep their state."""

from __future__ import annotations

from typing import Any

from sloguard.clock import FakeClock
from sloguard.components import build_sources
from sloguard.config.secrets import Secrets
from sloguard.config.spec import Config


def _cfg(**chat: Any) -> Config:
    return Config.model_validate({"version": "sloguard/v1", "gpu": {"nvml": "off"}, "targets": [
        {"name": "chat", "metrics_url": "http://127.0.0.1:1/metrics", **chat},
        {"name": "code", "metrics_url": "http://127.0.0.1:2/metrics"}],
        "host": {"processes": [{"name": "vllm", "process_name": "vllm"}]}})


def test_unchanged_sources_are_reused_changed_ones_rebuilt() -> None:
    clock = FakeClock()
    first = build_sources(_cfg(), Secrets(), clock)
    assert sorted(s.kind for s in first.values()) == ["host", "scrape", "scrape"]
    same = build_sources(_cfg(), Secrets(), clock, first)
    assert all(same[k] is first[k] for k in first)
    changed = build_sources(_cfg(scrape_interval="30s"), Secrets(), clock, first)
    reused = {s.target for k, s in changed.items() if first.get(k) is s}
    assert reused == {"code", ""}  # the changed chat target is new; code and host keep their state


def test_a_changed_secret_rebuilds_the_source() -> None:
    clock = FakeClock()
    first = build_sources(_cfg(), Secrets(targets={"chat": "k1"}), clock)
    again = build_sources(_cfg(), Secrets(targets={"chat": "k2"}), clock, first)
    chat_first = next(s for s in first.values() if s.target == "chat")
    assert all(s is not chat_first for s in again.values())
    assert all("k1" not in key and "k2" not in key for key in again)
