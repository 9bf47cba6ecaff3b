"""The README and docs say what the code and artifacts do: demo steps, dashboard variables, license, versions."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

from sloguard.demo import _parser, fault_help

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


def _block_after(marker: str) -> list[str]:
    """Return the lines of the first ```sh block after `marker`."""
    tail = README[README.index(marker):]
    block = tail[tail.index("```sh\n") + 6:]
    return block[:block.index("```")].splitlines()


def test_demo_fault_steps_run_as_written() -> None:
    lines = [ln.split("#")[0].strip() for ln in _block_after("work as written:")]
    start, post, delete = (ln for ln in lines if ln)
    argv = shlex.split(start)
    assert argv[0] == "scripts/demo.sh"
    args = _parser().parse_args(argv[1:])  # the demo accepts exactly these options
    assert args.sim_port and args.duration == 600
    port = args.sim_port
    assert shlex.split(post)[:3] == ["curl", "-XPOST", f"localhost:{port}/sim/faults"]
    assert json.loads(shlex.split(post)[4]) == {"load_multiplier": 4}
    assert shlex.split(delete) == ["curl", "-XDELETE", f"localhost:{port}/sim/faults"]
    # The demo prints the same commands first, for its own port.
    printed = fault_help(f"http://127.0.0.1:{port}")
    assert printed.splitlines()[0].startswith(f"simulator: http://127.0.0.1:{port} ")
    assert f"curl -XPOST http://127.0.0.1:{port}/sim/faults -d '{{\"load_multiplier\": 4}}'   # -> capacity" in printed


def test_deploy_docs_list_the_dashboards_variables() -> None:
    listed = re.search(r"^Variables: (.+)\.$", (DOCS / "deploy.md").read_text(), re.M)
    assert listed
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        names = [v["name"] for v in json.loads(path.read_text())["templating"]["list"]]
        assert listed.group(1).split(", ") == names, path.name


def test_license_file_is_the_declared_apache_2() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "Apache-2.0" and meta["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


def test_supported_python_matches_requires_python() -> None:
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    row = next(ln for ln in (DOCS / "upgrading.md").read_text().splitlines() if ln.startswith("| Python |"))
    assert f"`requires-python {requires.replace('>=', '>= ')}`" in row


def test_changelog_and_upgrade_notes_exist_and_link() -> None:
    assert (ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")
    assert "[CHANGELOG.md](CHANGELOG.md)" in README and "](docs/upgrading.md)" in README
    assert "[CHANGELOG.md](../CHANGELOG.md)" in (DOCS / "upgrading.md").read_text()
    assert "## Choose one alerting path" in README and "## Compared with what you may already run" in README
    assert (DOCS / "landing-page.png").is_file() and "docs/landing-page.png" in README
