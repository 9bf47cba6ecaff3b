"""The site's hook: links out of docs/ to repository files become repository addresses; the nav takes every page."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

from docs_hooks import REPO_BLOB, REPO_TREE, complete_nav, rewrite  # noqa: E402

DOCS = ROOT / "docs"


def test_links_out_of_docs_point_at_the_repository() -> None:
    text = "[a](../alerts/alertmanager.example.yml) [b](../alerts/) [c](deploy.md#2-systemd) [d](../no-such-file.txt)"
    out = rewrite(text, "slos-and-alerting.md", DOCS)
    assert f"[a]({REPO_BLOB}alerts/alertmanager.example.yml)" in out and f"[b]({REPO_TREE}alerts)" in out
    assert "[c](deploy.md#2-systemd)" in out  # a page of the site: mkdocs checks it
    assert "[d](../no-such-file.txt)" in out  # left as written, so --strict fails on it
    assert rewrite("[e](../../CHANGELOG.md)", "runbooks/x.md", DOCS) == f"[e]({REPO_BLOB}CHANGELOG.md)"
    assert rewrite("```\n[f](../LICENSE)\n```\n", "index.md", DOCS) == "```\n[f](../LICENSE)\n```\n"


def test_pages_outside_the_nav_are_added() -> None:
    nav = complete_nav([{"Home": "index.md"}, {"Runbooks": ["runbooks/index.md"]}], DOCS)
    runbooks = next(item["Runbooks"] for item in nav if isinstance(item, dict) and "Runbooks" in item)
    assert "runbooks/SloguardStoreDown.md" in runbooks
    more = next(item["More"] for item in nav if isinstance(item, dict) and "More" in item)
    assert "getting-started.md" in more and not any(p.startswith(("design-notes/", "runbooks/")) for p in more)


def test_an_optional_entry_waits_for_its_page() -> None:
    nav = [{"Operate": [{"Deploy": "deploy.md"}, {"Later": "not-yet.md"}]}, {"Only later": ["not-yet.md"]}]
    assert complete_nav(nav, DOCS, ("not-yet.md",))[:1] == [{"Operate": [{"Deploy": "deploy.md"}]}]
    assert {"Later": "not-yet.md"} in complete_nav(nav, DOCS)[0]["Operate"]  # not optional: kept, strict fails
