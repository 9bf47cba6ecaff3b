"""Incident acceptance, process faults: CPU burn in the serving process, an engine restart, errors, a hang.

One daemon watches one simulator per fault plus a healthy one; a real Prometheus runs the generated rules and a
real Alertmanager the generated example config. Every faulty SLO must page once, reach Slack in time, get its
cause, and resolve after the cure; every surface must tell the same story; the healthy SLO stays quiet.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from support import incident_checks as check
from support.incident_rig import Fault, Rig

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]  # one rig: learn, fault, page, cure, resolve
FAULTS = (
    # At time scale 2, as benchmarks/diagnosis.py (at scale 1 the engine's step loop makes up most of each stall);
    # 1.0 as the demo's: at 0.95 one loaded run hovered at the page threshold and paged twice
    Fault("cpu", {"cpu_burn": 1.0}, "latency", "serving_cpu_bound", ("--time-scale", "2")),
    Fault("restart", {"engine_restart_s": 10}, None, "engine_restart"),  # in-flight fail, new requests queue
    Fault("errors", {"error_rate": 0.5}, "availability", "failures"),
    Fault("hang", {"hang": True}, "availability", "failures"),
    Fault("healthy", None, None, None),
)


@pytest.fixture(scope="module")
def failed() -> list[BaseException]:
    return []


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, failed: list[BaseException]) -> Iterator[Rig]:
    if failed:  # the incident is played once: a failed run fails every test, without a second run
        raise AssertionError(f"the incident run failed: {failed[0]!r}")
    with Rig(tmp_path_factory.mktemp("incidents-process"), FAULTS) as r:
        try:
            r.run()
        except BaseException as exc:
            failed.append(exc)
            raise
        yield r


def test_every_fault_pages_and_gets_its_cause(rig: Rig) -> None:
    check.faults_page_and_are_named(rig)


def test_every_surface_tells_the_same_story(rig: Rig) -> None:
    for capture in (rig.before, rig.during, rig.after):
        check.surfaces_agree(capture)


def test_one_page_and_one_ticket_per_slo_and_sli(rig: Rig) -> None:
    check.one_page_one_ticket(rig)


def test_pages_reach_slack_in_time_and_resolve(rig: Rig) -> None:
    table = check.table(rig, check.pages_reach_slack_in_time(rig))
    print("\n" + table)
    if out := os.environ.get("SLOGUARD_INCIDENT_TABLE"):  # xdist keeps a worker's stdout: the figures for the notes
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(f"\n{__name__}\n{table}\n")


def test_prometheus_and_alertmanager_page_the_same(rig: Rig) -> None:
    check.prometheus_pages_the_same(rig)


def test_the_healthy_slo_stays_quiet(rig: Rig) -> None:
    # A CPU burn on a 2-core host slows its neighbours for real: the control here must not page or notify; its
    # objectives (a request over 2.5x the calibrated p95) may honestly miss. The engine rig's control is strict.
    check.healthy_is_quiet(rig, "healthy", strict=False)
