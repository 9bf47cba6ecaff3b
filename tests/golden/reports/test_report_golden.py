"""docs/report-sample.{md,html} are what `sloguard report` renders now; the JSON schema doc names every field."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from support.report_sample import sample_doc

from sloguard.reports.report import render

DOCS = Path(__file__).resolve().parents[3] / "docs"
UPDATE = os.environ.get("SLOGUARD_UPDATE_GOLDEN") == "1"


def test_sample_report_matches_the_renderers() -> None:
    doc = sample_doc()
    for ext in ("md", "html"):
        path = DOCS / f"report-sample.{ext}"
        text = render(doc, ext)
        if UPDATE:
            path.write_text(text, encoding="utf-8")
        assert path.read_text(encoding="utf-8") == text, f"docs/{path.name} is stale: SLOGUARD_UPDATE_GOLDEN=1"
    assert doc["verdict"] == "regression"


def test_every_json_field_is_documented() -> None:
    doc = json.loads(render(sample_doc(), "json"))
    schema = (DOCS / "report-schema.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`([a-z_0-9]+)`", schema))
    keys = set(doc) | set(doc["cells"][0]) | set(doc["baseline"]) | set(doc["settings"]) | set(doc["objectives"][0])
    keys |= set(doc["loads"][0]) | set(doc["counts"]) - {"no significant change", "not enough data"}
    missing = sorted(k for k in keys if k not in documented)
    assert not missing, f"docs/report-schema.md does not document: {missing}"
