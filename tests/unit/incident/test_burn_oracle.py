"""The incident rig's oracle (tests/support/burn_oracle.py): when burn rows held on stored requests, counted exactly."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.burn_oracle import Requests, Row, burn_rows

PAGE = Row(long=300.0, short=60.0, limit=0.06, min_bad=15, metric=None, threshold=None)  # a 1 h budget's page row
LIMITS = {"ttft": 0.25, "tpot": 0.11}
CONFIG = """version: sloguard/v1
targets:
  - {name: t, engine: vllm, metrics_url: "http://127.0.0.1:1/metrics", api_url: "http://127.0.0.1:1", model: m}
probes:
  - {name: t-0, target: t, api: chat, interval: 2s, timeout: 1900ms, max_tokens: 24, prompts: [{tokens: 128}]}
  - {name: t-1, target: t, api: chat, interval: 2s, timeout: 1900ms, max_tokens: 24, prompts: [{tokens: 128}]}
slos:
  - name: t
    target: t
    objectives: [{metric: ttft, percentile: 95, threshold: 250ms}]
    goodput: {ttft: 250ms, tpot: 110ms, target: 0.99}
    error_rate: {target: 0.99}
    error_budget_window: 1h
"""


def _store(tmp: Path, bad_at: set[int], failed_at: frozenset[int] = frozenset(), n: int = 600) -> Path:
    """One request a second for n seconds: slow (TTFT 0.5 s) at bad_at, failed at failed_at."""
    path = tmp / "s.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE probe_results (ts REAL, target TEXT, ok INTEGER, ttft_s REAL, tpot_s REAL)")
        db.executemany("INSERT INTO probe_results VALUES (?, 't', ?, ?, 0.02)",
                       [(float(t), int(t not in failed_at), 0.5 if t in bad_at else 0.1) for t in range(n)])
    return path


INCIDENT = set(range(0, 300))


@pytest.mark.parametrize(("bad", "start", "end", "held"), [
    (INCIDENT | {500, 515, 530, 545}, 380, 600, 545.0),  # 4 of 60 in a minute (6.7 % > 6 %), 45 in the long window
    (INCIDENT | {500, 515, 530}, 380, 600, None),  # 3 of 60: 5 %, under the factor
    (INCIDENT | {500, 515, 530, 545}, 380, 540, None),  # before the fourth
    ({500, 515, 530, 545}, 380, 600, None),  # the minute burns, but 4 bad in 5 min are no evidence (15)
    (INCIDENT, 0, 600, 14.0),  # the incident: from the 15th bad request on
])
def test_a_row_holds_only_on_its_counts(tmp_path: Path, bad: set[int], start: float, end: float,
                                        held: float | None) -> None:
    assert Requests(_store(tmp_path, bad), "t").held("latency", [PAGE], LIMITS, start, end) == held


def test_availability_counts_failures_not_slow_requests(tmp_path: Path) -> None:
    store = Requests(_store(tmp_path, INCIDENT, failed_at=frozenset(range(100, 130))), "t")
    assert store.held("availability", [PAGE], LIMITS, 0, 600) == 114.0
    (tmp_path / "slow").mkdir()
    assert Requests(_store(tmp_path / "slow", INCIDENT), "t").held("availability", [PAGE], LIMITS, 0, 600) is None


def test_the_rows_are_the_configs_own() -> None:
    rows = burn_rows(CONFIG)
    assert rows[("t", "latency", "page")] == [Row(300.0, 60.0, pytest.approx(0.06), 15, None, None)]
    assert {k[2] for k in rows} == {"page", "ticket"}


def test_how_long_a_row_held(tmp_path: Path) -> None:
    """From the 15th bad request (t=14) while the last minute holds 4 of 60 (to t=355.5: 296-299), in 0.5 s steps."""
    store = Requests(_store(tmp_path, INCIDENT), "t")
    assert store.held_for("latency", [PAGE], LIMITS, 0, 600) == (355.5 - 14) + 0.5
    assert store.held_for("latency", [PAGE], LIMITS, 400, 600) == 0.0
