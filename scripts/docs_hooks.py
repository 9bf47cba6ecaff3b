"""MkDocs hooks for the sloguard site (mkdocs.yml `hooks:`): repository links and a nav that takes new pages.

- A page may link to a repository file outside `docs/` (`../alerts/alertmanager.example.yml`): the link works
  on GitHub as written, and the site gets the file's address in the repository. A link to a file that does
  not exist is left as written, so `mkdocs build --strict` fails on it like on any broken link.
- A page in `docs/` that the nav does not list is added under "More" (pages from other branches show up
  before anyone places them); every page in `docs/runbooks/` is listed under "Runbooks". A nav entry named in
  `extra.optional_pages` is dropped while its page does not exist (a page another branch is bringing); every other
  entry must exist, or strict mode fails.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

REPO_BLOB = "https://github.com/sloguard/sloguard/blob/main/"
REPO_TREE = "https://github.com/sloguard/sloguard/tree/main/"
LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")
FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.M | re.S)
EXCLUDED = ("design-notes/",)  # mkdocs.yml exclude_docs: notes for the maintainers, not pages


def repo_link(page_src: str, target: str, docs_dir: Path) -> str | None:
    """Return the repository address of a relative link that leaves docs/ to an existing file, else None."""
    if "://" in target or target.startswith(("/", "mailto:")):
        return None
    rel = posixpath.normpath(posixpath.join("docs", posixpath.dirname(page_src), target))
    if not rel.startswith("../") and rel.startswith("docs/"):
        return None  # inside docs/: mkdocs resolves and checks it
    if rel.startswith("../"):
        return None  # outside the repository: leave it for strict mode to reject
    path = docs_dir.parent / rel
    if path.is_dir():
        return REPO_TREE + rel
    return REPO_BLOB + rel if path.is_file() else None


def rewrite(markdown: str, page_src: str, docs_dir: Path) -> str:
    """Return the page with its links to repository files outside docs/ pointed at the repository."""
    def link(m: re.Match[str]) -> str:
        url = repo_link(page_src, m.group(2), docs_dir)
        return m.group(0) if url is None else f"{m.group(1)}{url}{m.group(3) or ''}{m.group(4)}"

    out, last = [], 0
    for fence in FENCE.finditer(markdown):  # code blocks are shown as written
        out += [LINK.sub(link, markdown[last:fence.start()]), fence.group(0)]
        last = fence.end()
    out.append(LINK.sub(link, markdown[last:]))
    return "".join(out)


def _listed(nav: Any) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return set().union(*(_listed(v) for v in nav.values()))
    if isinstance(nav, list):
        return set().union(*(_listed(v) for v in nav)) if nav else set()
    return set()


def _without(nav: Any, absent: set[str]) -> Any:
    """Return the nav without the entries whose page is in `absent` (and without sections left empty)."""
    if isinstance(nav, list):
        kept = [_without(item, absent) for item in nav]
        return [k for k in kept if k not in (None, [], {})]
    if isinstance(nav, dict):
        kept = {k: _without(v, absent) for k, v in nav.items()}
        return {k: v for k, v in kept.items() if v not in (None, [], {})} or None
    return None if nav in absent else nav


def complete_nav(nav: list[Any], docs_dir: Path, optional: tuple[str, ...] = ()) -> list[Any]:
    """Return the nav with every runbook under "Runbooks" and every other unlisted page under "More"."""
    pages = sorted(p.relative_to(docs_dir).as_posix() for p in docs_dir.rglob("*.md"))
    pages = [p for p in pages if not p.startswith(EXCLUDED)]
    runbooks = [p for p in pages if p.startswith("runbooks/") and p != "runbooks/index.md"]
    out = _without([dict(item) if isinstance(item, dict) else item for item in nav], set(optional) - set(pages))
    for item in out:
        if isinstance(item, dict) and "Runbooks" in item:
            item["Runbooks"] = [*item["Runbooks"], *(p for p in runbooks if p not in _listed(item["Runbooks"]))]
    listed = _listed(out)
    more = [p for p in pages if p not in listed]
    return out + ([{"More": more}] if more else [])


def on_config(config: Any) -> Any:
    """Complete the nav with the pages it does not list yet."""
    if config.get("nav"):
        optional = tuple((config.get("extra") or {}).get("optional_pages") or ())
        config["nav"] = complete_nav(config["nav"], Path(config["docs_dir"]), optional)
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Point links to repository files outside docs/ at the repository."""
    return rewrite(markdown, page.file.src_uri, Path(config["docs_dir"]))
