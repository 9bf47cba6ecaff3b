"""A server SLO threshold inside a coarse engine bucket is warned about once; on a bucket edge it is not."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sloguard.config.spec import Config
from sloguard.model import Histogram, ModelView, ServerView
from sloguard.slo.coarse import BucketAdvisor
from sloguard.slo.model import slos_from_config

VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, math.inf)


def _view(target: str = "chat") -> ServerView:
    h = Histogram(tuple((b, 1.0) for b in VLLM_TTFT), 1.0, 0.1)
    return ServerView(target, "vllm", 0.0, {"m": ModelView("m", histograms={"ttft": h})})


def _slos(threshold: str, source: str = "server") -> Any:
    cfg = Config.model_validate({"version": "sloguard/v1", "targets": [{"name": "chat", "api_url": "http://x:1"}],
                                 "slos": [{"name": "s", "target": "chat", "source": source, "objectives": [
                                     {"metric": "ttft", "percentile": 95, "threshold": threshold}]}]})
    return slos_from_config(cfg)


@pytest.mark.parametrize(("threshold", "source", "warned"), [
    ("2s", "server", True),       # inside (1, 2.5]: 1.5 s wide > 0.2 s
    ("2.5s", "server", False),    # a bucket edge: exact
    ("1.0s", "server", False),    # le="1.0" == 1
    ("90ms", "server", True),     # inside (0.08, 0.1]: 20 ms wide > 10% of 90 ms
    ("2s", "probe", False),       # probe SLOs use exact per-request values
    ("10s", "server", True),      # above the largest finite bound
])
def test_warnings(threshold: str, source: str, warned: bool) -> None:
    adv = BucketAdvisor()
    got = adv.check(_view(), _slos(threshold, source))
    assert bool(got) == warned
    assert adv.check(_view(), _slos(threshold, source)) == []  # once only
    if got:
        assert got[0].startswith("slo s objective ttft p95: threshold ")


def test_other_targets_are_not_checked() -> None:
    assert BucketAdvisor().check(_view("other"), _slos("2s")) == []
