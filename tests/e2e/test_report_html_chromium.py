"""The HTML report in a real headless Chromium at phone size: plots drawn, nothing fetched, nothing too wide.

`SLOGUARD_UPDATE_SCREENSHOT=1` also writes the screenshot to docs/report-sample.png (linked from docs/reports.md).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.browser import visit
from support.procs import ROOT
from support.report_sample import sample_doc

from sloguard.reports.report import render

pytestmark = pytest.mark.e2e
SHOT = ROOT / "docs" / "report-sample.png"
PLOTS = """JSON.stringify({
  plots: [...document.querySelectorAll('svg.plot')].map(s => {
    const r = s.getBoundingClientRect();
    const marks = [...s.querySelectorAll('polyline, circle, rect')].filter(e => {
      const b = e.getBBox(); return b.width > 0 || b.height > 0;
    });
    return {w: r.width, h: r.height, points: +s.dataset.points, marks: marks.length,
            label: s.getAttribute('aria-label')};
  }),
  scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
  text: document.body.innerText.length,
  sections: [...document.querySelectorAll('h2')].map(h => h.textContent)
})"""


def test_the_report_renders_offline_on_a_phone(tmp_path: Path) -> None:
    import json

    page = tmp_path / "report.html"
    page.write_text(render(sample_doc(), "html"), encoding="utf-8")
    seen = visit(tmp_path, page.as_uri(), PLOTS)
    assert seen.requests == [page.as_uri()], f"the page fetched more than itself: {seen.requests}"
    got = json.loads(seen.value)
    labels = [p["label"] for p in got["plots"]]
    assert len(labels) >= 7, labels  # forest, 3 CDFs, waterfall, 2 load curves
    for p in got["plots"]:
        assert p["w"] > 300 and p["h"] > 60 and p["points"] > 0 and p["marks"] >= 3, p
    assert got["scrollWidth"] <= got["innerWidth"], "the page is wider than a phone (tables must scroll inside)"
    assert got["sections"] == ["Environment", "Metrics vs objectives", "Changes", "Distributions", "Stage breakdown",
                               "Load scenarios and breaking point", "Bottlenecks and recommendations", "Methodology"]
    assert seen.png[:8] == b"\x89PNG\r\n\x1a\n" and len(seen.png) > 20_000  # drawn text and tables


def test_a_desktop_screenshot_for_the_docs(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render(sample_doc(), "html"), encoding="utf-8")
    seen = visit(tmp_path, page.as_uri(), width=1000, height=900, mobile=False, shot_height=2400)
    shot = tmp_path / "report.png"
    shot.write_bytes(seen.png)
    assert seen.png[:8] == b"\x89PNG\r\n\x1a\n" and len(seen.png) > 100_000  # text, tables and the plots
    if os.environ.get("SLOGUARD_UPDATE_SCREENSHOT") == "1":
        shutil.copy(shot, SHOT)
    assert SHOT.is_file(), "commit docs/report-sample.png: rerun with SLOGUARD_UPDATE_SCREENSHOT=1"


def test_a_fetch_would_be_seen(tmp_path: Path) -> None:
    """The check above can fail: a page that loads an image from elsewhere shows that request."""
    page = tmp_path / "leaky.html"
    page.write_text('<!doctype html><img src="http://127.0.0.1:9/x.png">', encoding="utf-8")
    seen = visit(tmp_path, page.as_uri())
    assert "http://127.0.0.1:9/x.png" in seen.requests
