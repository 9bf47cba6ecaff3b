"""HA with a Kubernetes Lease: two daemons campaign through an API server double (tests/support/kubeapi.py).

One leads, the other stands by. The leader is cut off from the API server (its writes fail): it stops sending
before the other may take over, and the other takes over once the Lease expired. Then the new leader is SIGKILLed:
the survivor takes over after the Lease expires; the failover is printed (kill -> takeover write at the API
server, kill -> the survivor reports itself leader). "Before" and "after" are judged on the double's record of
each write and the daemons' own logs, never on a wall-clock guess.
"""

from __future__ import annotations

import os
import re
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest
from support.procs import Proc, free_port, http_get, metric_value, start_daemon, wait_until
from support.threadserver import ThreadServer

from tests.support.kubeapi import KubeAPI, LeaseCall, kubeconfig

pytestmark = pytest.mark.e2e
DURATION, RETRY = 3, 0.5  # lease_duration (s), retry_period (s)


def config(port: int, state: Path, kc: Path, me: str) -> str:
    return f"""\
version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 500ms
builtin_alerts: false
ha: {{mode: lease, identity: {me}, kubeconfig: "{kc}", lease_duration: {DURATION}s, retry_period: {RETRY * 1000:g}ms}}
notifiers:
  - {{name: console, type: log}}
"""


def leads(d: Proc, me: str) -> bool:
    text = http_get(f"{d.url}/metrics")[1].decode()
    return metric_value(text, "sloguard_ha_leader", {"mode": "lease", "identity": me}) == 1


def wrote(api: KubeAPI, holder: str) -> list[LeaseCall]:
    """Return the successful writes of the Lease naming `holder`."""
    return [c for c in api.lease_calls if c.verb in ("create", "update") and c.code in (200, 201)
            and c.holder == holder]


def renewed_at(call: LeaseCall) -> float:
    return datetime.fromisoformat(call.renew.replace("Z", "+00:00")).timestamp()


def stepped_down(d: Proc) -> float:
    """Return when the daemon logged that it stopped sending (its own clock, logfmt ts)."""
    line = next(x for x in d.output().splitlines() if "lost leadership" in x)
    ts = re.search(r"ts=(\S+)", line)
    assert ts is not None, line
    return datetime.fromisoformat(ts.group(1).replace("Z", "+00:00")).timestamp()


def takeover(api: KubeAPI, old: str, new: str) -> tuple[LeaseCall, LeaseCall]:
    """Return the old holder's last write and the new holder's first write after it."""
    last = wrote(api, old)[-1]
    first = next(c for c in wrote(api, new) if c.at > last.at)
    # The new holder wrote only once the Lease had expired: after renewTime + leaseDurationSeconds.
    assert first.at > renewed_at(last) + DURATION, (last, first)
    return last, first


def test_one_leader_steps_down_when_cut_off_and_the_other_takes_over_after_a_kill(tmp_path: Path) -> None:
    api = KubeAPI()
    with ThreadServer(api.app) as server:
        kc = tmp_path / "kubeconfig"
        kc.write_text(kubeconfig(server.url))
        one = start_daemon(tmp_path, config(free_port(), tmp_path / "s1", kc, "one"), name="one.yaml")
        two: Proc | None = None
        try:
            wait_until(lambda: leads(one, "one"), 30, "the first daemon to lead")
            two = start_daemon(tmp_path, config(free_port(), tmp_path / "s2", kc, "two"), name="two.yaml")
            wait_until(lambda: sum(c.verb == "get" for c in api.lease_calls[-20:]) >= 6, 30, "both campaigning")
            assert not leads(two, "two") and leads(one, "one") and not wrote(api, "two")

            api.refuse = "one"  # the leader can no longer renew
            wait_until(lambda: leads(two, "two"), 30, "the second daemon to take over")
            _, first = takeover(api, "one", "two")
            assert stepped_down(one) < first.at, "the cut-off leader still sent when the other took over"
            assert not leads(one, "one")

            api.refuse = None
            os.kill(two.popen.pid, signal.SIGKILL)
            killed = time.time()
            wait_until(lambda: leads(one, "one"), 30, "the survivor to lead")
            reported = time.time() - killed
            _, back = takeover(api, "two", "one")
            assert api.leases["sloguard-leader"]["spec"]["leaseTransitions"] == 2
            print(f"\nlease failover (lease_duration {DURATION}s, retry_period {RETRY}s): SIGKILL -> takeover write "
                  f"{back.at - killed:.2f}s, -> survivor reports leader {reported:.2f}s")
        finally:
            one.stop()
            if two is not None and two.popen.poll() is None:
                two.stop()
