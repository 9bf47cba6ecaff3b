"""`store:` slices: spec parsing, queries by label / identity / time on a real store file, clear errors."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from pathlib import Path

import pytest

from sloguard.config.spec import Config
from sloguard.model import ProbeResult
from sloguard.reports.cli import main
from sloguard.reports.data import DataError
from sloguard.reports.identity import Observed
from sloguard.reports.releases import Releases
from sloguard.reports.storeslice import count, parse, read_store, stream
from sloguard.statedir import DB_NAME
from sloguard.store import Store


@pytest.mark.parametrize(("spec", "filters", "span"), [
    ("store:release=v0.11", {"release": "v0.11"}, (-math.inf, math.inf)),
    ("store:2026-11-24T10:00:00Z..2026-11-24T11:00:00Z", {}, (1795514400.0, 1795518000.0)),
    ("store:target=chat,100..", {"target": "chat"}, (100.0, math.inf)),
    ("store:..200, engine_version=0.11.0", {"engine_version": "0.11.0"}, (-math.inf, 200.0)),
])
def test_specs(spec: str, filters: dict[str, str], span: tuple[float, float]) -> None:
    assert parse(spec) == (filters, span)


@pytest.mark.parametrize(("spec", "message"), [
    ("store:", "empty slice"), ("store:junk", "neither KEY=VALUE nor FROM..TO"),
    ("store:yesterday..today", "neither an RFC 3339 time"), ("store:200..100", "the time range is empty"),
])
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        parse(spec)


def cfg(release: str) -> Config:
    return Config.model_validate({"version": "sloguard/v1", "targets": [
        {"name": "chat", "engine": "vllm", "api_url": "http://x", "labels": {"release": release}}]})


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A store with 60 results of release a (ttft 0.1 s) then 60 of release b (ttft 0.2 s), stamped by Releases."""
    store = Store(tmp_path / DB_NAME)
    rel = Releases(cfg("a"), store.conn, threading.RLock(), 0.0)
    rel.observe(Observed("chat", "0.11.0", ["m"]), 1.0)
    for i, ttft in enumerate([0.1] * 60 + [0.2] * 60):
        if i == 60:
            rel.reconfigure(cfg("b"), 100.0)
        r = ProbeResult(ts=float(i if i < 60 else 100 + i), probe="p", target="chat", model="m", api="chat", ok=True,
                        ttft_s=ttft, e2e_s=ttft + 1, prompt_bucket="short")
        store.add_probe_results(rel.stamp([r]))
    store.close()
    return tmp_path


def test_a_label_selects_one_release(state: Path) -> None:
    a = read_store("store:release=a", "baseline", str(state), None)
    b = read_store("store:release=b,target=chat", "candidate", str(state), None)
    assert a.requests is not None and b.requests is not None
    assert a.requests.n == b.requests.n == 60
    assert set(a.requests.latency["ttft"]) == {0.1} and set(b.requests.latency["ttft"]) == {0.2}
    assert a.identity["labels"] == {"release": "a"} and a.identity["engine_version"] == "0.11.0"
    assert read_store("store:engine_version=0.11.0", "x", str(state), None).requests.n == 120  # type: ignore[union-attr]


def test_a_time_range_selects_across_releases(state: Path) -> None:
    s = read_store("store:0..30", "baseline", str(state), None)
    assert s.requests is not None and s.requests.n == 30 and s.time_range == (0.0, 29.0)


def test_store_errors_say_what_is_wrong(state: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"no release in the store has release=zz \(labels recorded: release=a, "
                                        r"release=b\)"):
        read_store("store:release=zz", "x", str(state), None)
    with pytest.raises(DataError, match="no probe results in this slice"):
        read_store("store:5000..6000", "x", str(state), None)
    with pytest.raises(DataError, match="no store at"):
        read_store("store:release=a", "x", str(tmp_path / "nowhere"), None)
    with pytest.raises(DataError, match="-c CONFIG, --state-dir DIR or --daemon URL"):
        read_store("store:release=a", "x", None, None)


def test_an_older_store_without_releases(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("CREATE TABLE probe_results (ts, probe, target)")
    conn.commit()
    with pytest.raises(DataError, match="holds no release identities"):
        read_store("store:release=a", "x", str(tmp_path), None)
    with pytest.raises(DataError, match="older sloguard"):
        read_store("store:0..10", "x", str(tmp_path), None)


def test_count_and_the_daemons_stream(state: Path) -> None:
    rid = read_store("store:release=b", "x", str(state), None).identity
    lines = list(stream(str(state), "store:release=b"))
    head = json.loads(lines[0])
    (release_id,) = head["releases"]
    assert head["releases"][release_id] == rid and len(lines) == 61
    assert count(str(state), release_id, "chat", 0, 1e9) == 60 and count(str(state), release_id, "chat", 0, 1) == 0


def test_the_cli_compares_two_releases_of_a_store(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--baseline", "store:release=a", "--candidate", "store:release=b", "--state-dir", str(state),
                 "--fail-on", "regression", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    p50 = next(c for c in doc["cells"] if c["metric"] == "ttft" and c["stat"] == "p50")
    assert code == 1 and p50["delta"] == pytest.approx(1.0) and p50["verdict"] == "regression"
    assert doc["baseline"]["identity"]["labels"] == {"release": "a"}


def test_a_store_from_before_releases_gains_the_column_and_keeps_its_rows(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("CREATE TABLE probe_results (ts, probe, target, model, api, ok)")
    conn.execute("INSERT INTO probe_results VALUES (1.0, 'p', 'chat', 'm', 'chat', 1)")
    conn.commit()
    conn.close()
    store = Store(tmp_path / DB_NAME)
    (old,) = store.probe_results_since(0.0)
    assert old.release == "" and old.ok
    store.close()
    s = read_store("store:0..10", "x", str(tmp_path), None)
    assert s.requests is not None and s.requests.n == 1
