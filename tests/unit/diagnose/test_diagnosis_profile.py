"""benchmarks/diagnosis.py: its profiles render configs the daemon accepts; the defaults one is the daemon's."""

from __future__ import annotations

from types import ModuleType

import pytest

from sloguard.config.load import load_config_text
from sloguard.config.spec import Config, DiagnoseSpec, HostSpec, TargetSpec
from tests.support.benchmark_module import load


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load("diagnosis")


def _config(bench: ModuleType, monkeypatch: pytest.MonkeyPatch, profile: str) -> Config:
    monkeypatch.setattr(bench, "PROFILE", bench.PROFILES[profile])
    lanes = [bench.Lane("kv-shrink-0", "kv_shrink", 1, port=9001, pid_file="/tmp/a.pid"),
             bench.Lane("healthy-0", "", 401, port=9002, pid_file="/tmp/b.pid")]
    return load_config_text(bench.daemon_config(lanes, 9000, "/tmp/state", bench.PROFILES[profile].window))


def test_defaults_profile_is_the_daemons_defaults(bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _config(bench, monkeypatch, "defaults")
    target = TargetSpec.model_fields
    assert cfg.evaluation_interval == Config.model_fields["evaluation_interval"].default == 15.0
    assert cfg.targets[0].scrape_interval == target["scrape_interval"].default
    assert cfg.targets[0].scrape_timeout == target["scrape_timeout"].default
    assert cfg.host is not None and cfg.host.interval == HostSpec.model_fields["interval"].default
    assert cfg.diagnose == DiagnoseSpec()
    assert [(p.interval, p.timeout) for p in cfg.probes] == [(9.0, 8.9)] * 6  # three per SLO
    assert bench.fault_payload("engine_restart") == {"engine_restart_s": 30.0}


def test_the_benchmarks_default_is_the_daemons_timing(bench: ModuleType) -> None:
    assert bench.PROFILE is bench.PROFILES["defaults"] and bench.TPOT_OBJECTIVE == "100ms"
    assert (bench.PROFILE.tpot, bench.PROFILE.parallel) == ("100ms", 9)  # a CPU burn breaches; one burn a round
    assert (bench.PROFILES["compressed"].tpot, bench.PROFILES["compressed"].parallel) == ("150ms", 4)


def test_compressed_profile(bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _config(bench, monkeypatch, "compressed")
    assert (cfg.evaluation_interval, cfg.targets[0].scrape_interval, cfg.diagnose.window) == (1.0, 1.0, 20.0)
    assert len(cfg.probes) == 20
    assert bench.fault_payload("engine_restart") == {"engine_restart_s": 6.0}
    assert bench.fault_payload("load_surge") == bench.FAULTS["load_surge"][1]


@pytest.mark.parametrize(("lanes", "parallel"), [(45, 9), (45, 4), (10, 3), (3, 9)])
def test_rounds_spread_each_fault(bench: ModuleType, lanes: int, parallel: int) -> None:
    faults = list(bench.FAULTS)
    todo = [bench.Lane(f"l{i}", faults[i % len(faults)] if i < 35 else "", i) for i in range(lanes)]
    got = bench.rounds(todo, parallel)
    assert sorted(lane.name for r in got for lane in r) == sorted(lane.name for lane in todo)
    assert max(len(r) for r in got) <= parallel
    burns = [sum(lane.fault == "cpu_burn" for lane in r) for r in got]
    assert len(got) == -(-lanes // parallel)
    assert max(burns) <= 1  # every case has at least as many rounds as CPU burns: never two in one round
