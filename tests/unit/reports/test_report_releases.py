"""Release identities and boundaries: settle, change, restart, soak, due; stored as it goes."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from sloguard.config.spec import Config
from sloguard.model import ProbeResult
from sloguard.reports.identity import UNSEEN, Identity, Observed, merge
from sloguard.reports.releases import Releases


def config(labels: dict[str, str] | None = None, engine: str = "vllm", **reports: Any) -> Config:
    return Config.model_validate({
        "version": "sloguard/v1",
        "targets": [{"name": "chat", "engine": engine, "api_url": "http://x", "metrics_url": "http://x/metrics",
                     "labels": labels or {"release": "a"}}],
        "reports": {"after": "1h", "min_requests": 50, "max_wait": "1d", "identity_interval": "60s", **reports}})


def releases(tmp: Path, cfg: Config, now: float = 1000.0) -> Releases:
    return Releases(cfg, sqlite3.connect(tmp / "db"), threading.RLock(), now)


def result(target: str = "chat") -> ProbeResult:
    return ProbeResult(ts=1.0, probe="p", target=target, model="m", api="chat", ok=True)


def test_nothing_is_stamped_until_the_identity_was_read(tmp_path: Path) -> None:
    r = releases(tmp_path, config())
    assert r.stamp([result()])[0].release == ""
    r.observe(Observed("chat", "0.11.0", ["m"]), 1001)
    ident = r.identity("chat")
    assert ident == Identity("chat", "vllm", "0.11.0", "m", {"release": "a"})
    assert r.stamp([result(), result("other")])[0].release == ident.release_id
    assert r.boundaries == []  # the first identity is no release change


@pytest.mark.parametrize(("change", "what"), [
    (lambda r, now: r.reconfigure(config({"release": "b"}), now), "labels"),
    (lambda r, now: r.observe(Observed("chat", "0.12.0", UNSEEN), now), "engine version"),
    (lambda r, now: r.observe(Observed("chat", UNSEEN, ["m2"]), now), "served model"),
])
def test_a_changed_identity_is_a_boundary(tmp_path: Path, change: Any, what: str) -> None:
    r = releases(tmp_path, config())
    r.observe(Observed("chat", "0.11.0", ["m"]), 1001)
    before = r.identity("chat")
    change(r, 2000.0)
    after = r.identity("chat")
    assert before is not None and after is not None and before != after, what
    (b,) = r.boundaries
    assert (b.target, b.at, b.before, b.after, b.status) == ("chat", 2000.0, before.release_id, after.release_id,
                                                             "soaking")
    assert r.stamp([result()])[0].release == after.release_id


def test_a_failed_read_changes_nothing(tmp_path: Path) -> None:
    r = releases(tmp_path, config())
    r.observe(Observed("chat", "0.11.0", ["m"]), 1001)
    r.observe(Observed("chat", UNSEEN, UNSEEN), 1100)  # server restarting
    assert r.boundaries == [] and r.identity("chat") is not None
    assert merge(Identity("t", engine_version="1"), Observed("t", None, [])).engine_version is None  # 404: none


def test_a_restart_is_not_a_release_but_a_change_while_down_is(tmp_path: Path) -> None:
    r = releases(tmp_path, config())
    r.observe(Observed("chat", "0.11.0", ["m"]), 1001)
    r.touch(1500)
    again = releases(tmp_path, config(), 2000)
    again.observe(Observed("chat", "0.11.0", ["m"]), 2001)
    assert again.boundaries == []
    third = releases(tmp_path, config(), 3000)
    third.observe(Observed("chat", "0.12.0", ["m"]), 3001)
    assert len(third.boundaries) == 1 and third.boundaries[0].at == 3001


def test_under_engine_auto_the_scrape_names_the_engine_before_it_settles(tmp_path: Path) -> None:
    r = releases(tmp_path, config(engine="auto"))
    r.observe(Observed("chat", "0.11.0", ["m"]), 1001)
    assert r.identity("chat") is None  # waits for the scrape (or two identity intervals)
    r.observe_engine("chat", "vllm", 1002)
    ident = r.identity("chat")
    assert ident is not None and ident.engine == "vllm" and r.boundaries == []


def count_of(before: int, after: int) -> Any:
    return lambda rid, target, t0, t1: after if t0 >= 5000 else before


def test_a_report_is_due_after_the_soak_with_enough_results(tmp_path: Path) -> None:
    r = releases(tmp_path, config())
    r.observe(Observed("chat", "0.11.0", ["m"]), 1001)
    r.reconfigure(config({"release": "b"}), 5000)
    assert r.due(5000 + 3599, count_of(100, 100)) == []
    assert r.due(5000 + 3600, count_of(100, 10)) == []  # waits for min_requests
    (b,) = r.due(5000 + 4000, count_of(100, 60))
    assert b.status == "running" and r.due(9999, count_of(100, 60)) == []
    r.finished(b, "done", "regression", "/x")
    assert releases(tmp_path, config(), 9000).boundaries[0].verdict == "regression"


def test_at_max_wait_a_report_is_made_with_what_there_is_or_skipped(tmp_path: Path) -> None:
    r = releases(tmp_path, config())
    r.observe(Observed("chat", "0.11.0", ["m"]), 1001)
    r.reconfigure(config({"release": "b"}), 5000)
    r.reconfigure(config({"release": "c"}), 6000)
    assert [b.id for b in r.due(5000 + 86400, count_of(30, 30))] == [1]
    r2 = releases(tmp_path, config({"release": "c"}), 7000)
    r2.due(6000 + 86400, count_of(5, 5))
    assert r2.boundaries[1].status == "skipped" and "not enough probe results" in r2.boundaries[1].detail


def test_a_report_running_at_exit_is_made_again(tmp_path: Path) -> None:
    r = releases(tmp_path, config())
    r.observe(Observed("chat", "0.11.0", ["m"]), 1001)
    r.reconfigure(config({"release": "b"}), 5000)
    r.due(9000, count_of(100, 100))
    again = releases(tmp_path, config({"release": "b"}), 9500)
    again.resume()
    assert again.boundaries[0].status == "soaking"


def test_disabled_reports_record_the_boundary_but_skip_it(tmp_path: Path) -> None:
    r = releases(tmp_path, config(enabled=False))
    r.observe(Observed("chat", "0.11.0", ["m"]), 1001)
    r.reconfigure(config({"release": "b"}, enabled=False), 2000)
    assert r.boundaries[0].status == "skipped"
