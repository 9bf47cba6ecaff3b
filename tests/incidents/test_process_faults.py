"""Incident acceptance, process faults: CPU burn in the serving process, an engine restart, errors, a hang.

One daemon watches one simulator per fault plus a healthy one; a real Prometheus runs the generated rules and a
real Alertmanager the generated example config. Every faulty SLO must page once, reach Slack in time, get its
cause, and resolve after the cure; every surface must tell the same story; the healthy SLO stays quiet.
"""

from __future__ import annotations

import pytest
from support.incident_rig import Fault
from support.incident_suite import *  # noqa: F403 (the shared tests and their fixtures, collected here)

RIG = "incidents-process"  # its temporary directory
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
