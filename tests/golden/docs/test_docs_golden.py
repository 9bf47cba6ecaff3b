"""The generated reference pages match their generators: the config schema and the exporter's declarations.

`SLOGUARD_UPDATE_GOLDEN=1` rewrites docs/config-reference.md and docs/metrics-reference.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sloguard.catalog import families
from sloguard.config import reference as config_reference
from sloguard.exporter import reference as metrics_reference

ROOT = Path(__file__).resolve().parents[3]
UPDATE = os.environ.get("SLOGUARD_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize(("page", "render"), [
    ("config-reference.md", lambda: config_reference.markdown(ROOT)),
    ("metrics-reference.md", metrics_reference.markdown),
])
def test_generated_page_is_current(page: str, render: object) -> None:
    path = ROOT / "docs" / page
    text = render()  # type: ignore[operator]
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text, f"docs/{page} is stale: rerun with SLOGUARD_UPDATE_GOLDEN=1"


def test_every_config_key_has_a_row_with_a_description_and_an_example() -> None:
    from sloguard.config.schema import config_schema

    schema = config_schema()
    rows = [ln for ln in config_reference.markdown(ROOT).splitlines() if ln.startswith("| `")]
    keys = len(schema["properties"]) + sum(len(d.get("properties", {})) for d in schema["$defs"].values())
    assert len(rows) == keys
    cells = [[c.strip() for c in r.strip("|").split(" | ")] for r in rows]
    assert all(c[3] for c in cells), "a key without a description"
    # The one key no shipped example sets: a service has no /metrics of its own (check refuses it).
    assert [c[0] for c in cells if c[4] == "—"] == ["`metrics_url`"]


def test_every_family_is_on_the_metrics_page_with_its_labels() -> None:
    lines = metrics_reference.markdown().splitlines()
    for name, fd in families().items():
        first = next(iter(fd.samples()))
        row = next(ln for ln in lines if ln.startswith(f"| `{first}`"))
        assert all(f"`{label}`" in row for label in fd.labels) and f"| {fd.kind} |" in row, name
