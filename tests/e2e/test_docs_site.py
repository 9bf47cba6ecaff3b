"""The docs site as a reader gets it: `mkdocs build --strict` (broken links, missing pages and unknown anchors
fail), then one page per nav section opened in headless Chromium at 640 px: readable without sideways scrolling,
nothing fetched from another host.

`SLOGUARD_UPDATE_SCREENSHOT=1` also writes each page's screenshot to docs/screenshots/<section>.png.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.browser import visit
from support.procs import ROOT

pytestmark = pytest.mark.e2e
SHOTS = ROOT / "docs" / "screenshots"
# One page per section of the nav (mkdocs.yml), the ones with the widest tables and code among them.
PAGES = {
    "home": "", "getting-started": "getting-started/", "concepts": "slos-and-alerting/", "use": "load-tests/",
    "operate": "troubleshooting/", "reference": "config-reference/", "runbooks": "runbooks/SloguardErrorBudgetBurn/",
    "benchmarks": "benchmarks/",
}
PROBE = """JSON.stringify({
  scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
  title: document.title, h1: (document.querySelector('article h1') || {}).textContent || '',
  text: (document.querySelector('article') || document.body).innerText.length,
  fontPx: parseFloat(getComputedStyle(document.querySelector('article p') || document.body).fontSize),
})"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Build the site strictly and serve it on loopback; yield its base URL."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.RequestHandlerClass.log_message = lambda *a: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def test_every_page_is_built_and_nothing_is_left_out(site: str) -> None:
    import urllib.request

    for page in sorted((ROOT / "docs").rglob("*.md")):
        rel = page.relative_to(ROOT / "docs").as_posix()
        if rel.startswith("design-notes/"):
            continue
        url = site + ("" if rel == "index.md" else rel.removesuffix("index.md").removesuffix(".md") + "/")
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert resp.status == 200, rel


@pytest.mark.parametrize("section", sorted(PAGES))
def test_a_page_of_each_section_reads_at_640_px(site: str, section: str, tmp_path: Path) -> None:
    seen = visit(tmp_path, site + PAGES[section], PROBE, width=640, height=560, mobile=False)
    got = json.loads(seen.value)
    assert got["scrollWidth"] <= got["innerWidth"], f"{section}: wider than 640 px ({got['scrollWidth']})"
    assert got["h1"] and got["text"] > 500 and got["fontPx"] >= 12, got
    foreign = [u for u in seen.requests if not u.startswith((site, "data:", "blob:"))]
    assert not foreign, foreign
    assert seen.png[:8] == b"\x89PNG\r\n\x1a\n" and len(seen.png) > 10_000
    if os.environ.get("SLOGUARD_UPDATE_SCREENSHOT") == "1":
        SHOTS.mkdir(exist_ok=True)
        (SHOTS / f"{section}.png").write_bytes(seen.png)
    assert (SHOTS / f"{section}.png").is_file(), "commit docs/screenshots: rerun with SLOGUARD_UPDATE_SCREENSHOT=1"


def test_chromium_is_there() -> None:
    assert shutil.which("chromium") or shutil.which("chromium-browser")
