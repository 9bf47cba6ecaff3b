"""Pure parts of the fleet: target groups, replica lists, adding replicas, and the replica outlier signal."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sloguard.config.fleet import DiscoverySpec, FileSDSpec
from sloguard.config.spec import ServiceSpec
from sloguard.diagnose.history import Series
from sloguard.diagnose.replicas import replica_signals
from sloguard.discovery import groups
from sloguard.fleet.replica import service_replicas
from sloguard.model import Histogram, ModelView, ServerView
from sloguard.untrusted import Invalid
from sloguard.windows.aggregate import add_replicas, merge_views

SPEC = DiscoverySpec(name="d", file_sd=FileSDSpec(files=["x.json"]), max_targets=3)
INF = math.inf


def h(bounds: tuple[float, ...], count: float, total: float) -> Histogram:
    return Histogram(tuple((b, count) for b in (*bounds, INF)), count, total)


@pytest.mark.parametrize(("doc", "addresses"), [
    ([{"targets": ["10.0.0.1:8000", "[::1]:9"], "labels": {"app": "chat"}}], ["10.0.0.1:8000", "[::1]:9"]),
    ([{"targets": ["a:1"]}, {"targets": "not a list"}, {"targets": ["b:2"]}], ["a:1", "b:2"]),  # bad group dropped
    ([{"targets": ["no-port"]}, {"targets": ["c:3"]}], ["c:3"]),
    ([{"targets": ["d:70000"]}], []),
    ([{"targets": ["e:1"], "labels": {"bad-name": "x"}}], []),
    ([{"targets": ["f:1"], "labels": {"__metrics_path__": "/x/metrics", "__scheme__": "https"}}], ["f:1"]),
])
def test_groups_keep_the_valid_targets(doc: Any, addresses: list[str]) -> None:
    assert [t.address for t in groups.parse(doc, SPEC)] == addresses


@pytest.mark.parametrize("doc", [{"targets": []}, "[]", None, [{"targets": ["a:1", "b:2", "c:3", "d:4"]}]])
def test_an_unusable_answer_fails_whole(doc: Any) -> None:
    with pytest.raises(Invalid):
        groups.parse(doc, SPEC)


def test_meta_labels_set_the_url_and_are_not_target_labels() -> None:
    t = groups.parse([{"targets": ["f:1"], "labels": {"__metrics_path__": "/r/1/metrics", "app": "x"}}], SPEC)[0]
    assert t.metrics_url == "http://f:1/r/1/metrics" and dict(t.labels) == {"app": "x"}


def test_service_replicas_match_dedupe_and_bound() -> None:
    svc = ServiceSpec(name="s", discovery="d", match={"app": "chat"}, max_replicas=2,
                      replicas=[{"name": "static", "metrics_url": "http://s:1/metrics"}])  # type: ignore[list-item]
    found = groups.parse([{"targets": ["a:1"], "labels": {"app": "chat"}},
                          {"targets": ["b:1"], "labels": {"app": "other"}},
                          {"targets": ["c:1"], "labels": {"app": "chat", "model": "m", "engine": "sglang"}}],
                         DiscoverySpec(name="d", file_sd=FileSDSpec(files=["x"])))
    reps, dropped = service_replicas(svc, found)
    assert [r.name for r in reps] == ["static", "a:1"] and dropped == 1


def test_replicas_on_one_grid_add_up_and_different_grids_are_named() -> None:
    summed, conflict = add_replicas("s", "ttft", {"r0": h((0.1, 1.0), 4, 1.0), "r1": h((0.1, 1.0), 6, 2.0)})
    assert conflict is None and summed is not None and summed.count == 10
    summed, conflict = add_replicas("s", "ttft", {"r0": h((0.1, 1.0), 4, 1.0), "r1": h((0.25, 1.0), 6, 2.0)})
    assert summed is None and conflict is not None
    assert "replica r0" in conflict.text and "replica r1" in conflict.text and "0.25" in conflict.text


def test_merged_view_sums_queues_and_keeps_the_fullest_cache() -> None:
    views = [ServerView("s", "vllm", t, {"m": ModelView("m", gauges={"requests_waiting": w,
                                                                     "kv_cache_usage_ratio": k})}, replica=f"r{t:g}")
             for t, w, k in ((1.0, 2.0, 0.3), (2.0, 3.0, 0.9))]
    got = merge_views(views)
    assert got is not None and got.ts == 2.0
    assert dict(got.models["m"].gauges) == {"requests_waiting": 5.0, "kv_cache_usage_ratio": 0.9}


class Replicas:
    """A server of three replicas whose stage means and gauges a case sets."""

    def __init__(self, decode: dict[str, float], kv: dict[str, float] | None = None) -> None:
        self.decode, self.kv = decode, kv or {}

    def replicas(self, target: str) -> list[str]:
        return sorted(self.decode)

    def replica_histograms(self, target: str, signal: str, window: float, now: float) -> dict[str, Histogram]:
        return {r: h((0.1,), 100, 100 * m) for r, m in self.decode.items()} if signal == "decode" else {}

    def latest_of(self, target: str, replica: str) -> ServerView | None:
        gauges = {"kv_cache_usage_ratio": self.kv.get(replica, 0.2)}
        return ServerView(target, "vllm", 1.0, {"m": ModelView("m", gauges=gauges)}, replica=replica)

    def replica_restarts(self, target: str) -> dict[str, int]:
        return dict.fromkeys(self.decode, 0)


@pytest.mark.parametrize(("decode", "kv", "outliers", "named"), [
    ({"r0": 0.05, "r1": 0.20, "r2": 0.05}, {}, 1.0, "replica r1 of 3"),
    ({"r0": 0.05, "r1": 0.06, "r2": 0.05}, {}, 0.0, ""),  # within noise
    ({"r0": 0.20, "r1": 0.20, "r2": 0.05}, {}, 0.0, ""),  # two of three: the service, not a replica
    ({"r0": 0.05, "r1": 0.05, "r2": 0.05}, {"r2": 0.97}, 1.0, "replica r2 of 3: KV cache"),
])
def test_replica_outliers(decode: dict[str, float], kv: dict[str, float], outliers: float, named: str) -> None:
    sig, notes = replica_signals(Series(horizon=600), Replicas(decode, kv), "s", 60.0, 600.0, 10.0)
    assert sig == {"replica_outliers": outliers}
    assert named in notes.get("replica_outliers", "") if named else notes == {}


def test_one_replica_has_no_outlier() -> None:
    """No other replica to differ from: 0 outliers, so the diagnosis does not list the signal as missing."""
    assert replica_signals(Series(horizon=600), Replicas({"r0": 0.1}), "s", 60.0, 600.0, 10.0) == (
        {"replica_outliers": 0.0}, {})
