"""The status page of a running daemon, opened in headless Chromium: one line per SLO first, readable at 640 px.

`SLOGUARD_UPDATE_SCREENSHOT=1` also writes the screenshots to docs/landing-page.png and docs/status-page-640.png.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.browser import FLAGS, chromium, visit
from support.procs import (
    PATIENCE,
    ROOT,
    Proc,
    free_port,
    http_get,
    http_post,
    sim_config,
    simulator,
    start_daemon,
    wait_until,
)

pytestmark = pytest.mark.e2e
SHOT = ROOT / "docs" / "landing-page.png"
NARROW = ROOT / "docs" / "status-page-640.png"


def _browse(tmp: Path, *args: str) -> str:
    profile = tmp / f"profile-{len(list(tmp.iterdir()))}"  # a fresh profile per run: no state between runs
    done = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=120 * PATIENCE, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _png(path: Path) -> tuple[int, int, bytes]:
    """Return width, height and the decompressed scanlines of a PNG (stdlib only)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, size = 8, b"", (0, 0)
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return size[0], size[1], zlib.decompress(idat)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, Proc]]:
    tmp = tmp_path_factory.mktemp("landing")
    with simulator(tmp) as sim:
        proc = start_daemon(tmp, sim_config(sim, free_port(), tmp / "state"))
        try:
            def ready() -> bool:
                slos = json.loads(http_get(f"{proc.url}/api/v1/slos")[1])["slos"]
                probes = json.loads(http_get(f"{proc.url}/debug/probes")[1])
                return bool(probes) and all(any(o.get("value") is not None for o in s["objectives"]) for s in slos)

            wait_until(ready, 60, "every SLO with data and a probe result")
            yield proc, sim
        finally:
            proc.stop()


@pytest.fixture(scope="module")
def daemon(rig: tuple[Proc, Proc]) -> Proc:
    return rig[0]


def test_dom_has_a_row_per_slo_source_and_link(daemon: Proc, tmp_path: Path) -> None:
    dom = _browse(tmp_path, "--dump-dom", f"{daemon.url}/")
    board = dom[dom.index('<table class="board">'):]
    board = board[:board.index("</table>")]
    assert board.count("<tr>") == 3 and 'href="#slo-sim-latency"' in board  # one line per SLO, first
    for name, source in (("sim-latency", "probe"), ("sim-server", "server")):
        assert f'id="slo-{name}"' in dom and f"SLO {name} ({source}, target sim)" in dom
    assert "p95 ttft &lt;= 500ms" in dom and "goodput &gt;= 95.0%" in dom  # percent, not 0.95
    assert "<td>scrape</td><td>sim</td>" in dom  # the target's health
    assert "<td>sim-chat</td><td>sim</td>" in dom, dom[dom.find("Recent probes"):][:600]  # a recent probe
    assert 'href="metrics"' in dom and 'href="api/v1/slos"' in dom
    assert "<script" not in dom


def test_screenshot_is_a_drawn_page(daemon: Proc, tmp_path: Path) -> None:
    shot = tmp_path / "landing.png"
    _browse(tmp_path, "--hide-scrollbars", "--window-size=1280,1600", f"--screenshot={shot}", f"{daemon.url}/")
    width, height, raw = _png(shot)
    assert (width, height) == (1280, 1600)
    # A blank page compresses to a handful of byte values (filter bytes, one colour); text, tables and the
    # coloured state badges give many.
    assert len(set(raw)) > 32, f"the screenshot looks blank ({len(set(raw))} distinct byte values)"
    if os.environ.get("SLOGUARD_UPDATE_SCREENSHOT") == "1":
        shutil.copy(shot, SHOT)
    assert SHOT.is_file(), "commit docs/landing-page.png: rerun with SLOGUARD_UPDATE_SCREENSHOT=1"


PROBE = """JSON.stringify({width: document.documentElement.scrollWidth,
  first: document.querySelector('table.board tr:nth-child(2)').innerText})"""


def test_readable_at_640px_with_the_breach_on_the_first_screen(rig: tuple[Proc, Proc], tmp_path: Path) -> None:
    daemon, sim = rig
    assert http_post(f"{sim.url}/sim/faults", {"stall_first_token_s": 1.0})[0] == 200
    try:
        def breached() -> bool:
            slos = json.loads(http_get(f"{daemon.url}/api/v1/slos")[1])["slos"]
            return any((s.get("incident") or {}).get("state") == "BREACH" for s in slos)
        wait_until(breached, 120, "an SLO in BREACH")
        seen = visit(tmp_path, f"{daemon.url}/", PROBE, width=640, height=900, mobile=False, shot_height=900)
    finally:
        http_post(f"{sim.url}/sim/faults", method="DELETE")
    got = json.loads(seen.value)
    assert got["width"] <= 640, f"the page scrolls sideways at 640 px ({got['width']} px wide)"
    assert "BREACH" in got["first"] and "sim-latency" in got["first"], got["first"]
    assert all(r.startswith(daemon.url) for r in seen.requests), seen.requests  # nothing from elsewhere
    if os.environ.get("SLOGUARD_UPDATE_SCREENSHOT") == "1":
        NARROW.write_bytes(seen.png)
    assert NARROW.is_file(), "commit docs/status-page-640.png: rerun with SLOGUARD_UPDATE_SCREENSHOT=1"
