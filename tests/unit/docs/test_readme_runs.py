"""The README and the docs as a user reads them: the first config passes `sloguard check` exactly as written, every
command names a script, subcommand and options that exist, and every full config shown in the docs is valid."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def blocks(text: str, lang: str) -> list[str]:
    """Return the fenced blocks of one language, as written."""
    return [body for kind, body in FENCE.findall(text) if kind == lang]


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else None]


def sloguard(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `sloguard ARGS` as a user would, from `cwd`, with this tree's package."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "sloguard", *args], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=120)


def test_readme_is_short() -> None:
    assert len(README.splitlines()) <= 300


def test_the_first_config_passes_check_exactly_as_written(tmp_path: Path) -> None:
    part = section("A first config")
    (config,) = blocks(part, "yaml")
    assert len(config.splitlines()) <= 30 and "type: slack" in config and "goodput:" in config
    assert "Save it as `sloguard.yaml`" in part
    (tmp_path / "sloguard.yaml").write_text(config)
    commands = [ln.split("#")[0].strip() for ln in blocks(part, "sh")[0].splitlines()]
    check = shlex.split(commands[0])
    assert check[:2] == ["sloguard", "check"]
    done = sloguard(*check[1:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "sloguard.yaml: ok (1 targets, 1 probes, 1 SLOs, 0 alerts, 1 notifiers)" in done.stdout
    # Its secret comes from the environment, as the next line of the README says.
    env = dict(var.split("=", 1) for ln in commands if ln.startswith("export ") for var in shlex.split(ln)[1:])
    assert set(env) == {"SLACK_WEBHOOK_URL"}
    done = sloguard(*check[1:], "--secrets", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr


def test_getting_started_shows_the_same_first_config() -> None:
    (readme,) = blocks(section("A first config"), "yaml")
    assert readme in blocks((ROOT / "docs" / "getting-started.md").read_text(), "yaml")


def _docs_configs() -> list[tuple[str, str]]:
    out = [("README.md", b) for b in blocks(README, "yaml") if b.startswith("version: sloguard/v1")]
    for page in sorted((ROOT / "docs").rglob("*.md")):
        out += [(page.name, b) for b in blocks(page.read_text(), "yaml") if b.startswith("version: sloguard/v1")]
    return out


@pytest.mark.parametrize(("page", "config"), _docs_configs(), ids=lambda v: v if v.endswith(".md") else "")
def test_every_full_config_in_the_docs_passes_check(page: str, config: str, tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(config)
    done = sloguard("check", "-c", "c.yaml", cwd=tmp_path)
    assert done.returncode == 0, f"{page}: {done.stderr}"


def _commands() -> list[str]:
    lines = [ln.split(" #")[0].strip() for b in blocks(README, "sh") for ln in b.splitlines()]
    return [ln for ln in lines if ln]


def _help(sub: str) -> str:
    done = sloguard(sub, "--help", cwd=ROOT)
    assert done.returncode == 0, f"sloguard {sub}: {done.stderr}"
    return done.stdout


def test_every_readme_command_exists_as_written() -> None:
    helps: dict[str, str] = {}
    for line in _commands():
        for part in re.split(r"\s*&&\s*", line):
            argv = shlex.split(part)
            words = [w for w in argv if not w.startswith(("sudo", "SLOGUARD_"))]
            exe = words[0]
            if exe.endswith("/sloguard") or exe == "sloguard":
                sub = words[1]
                helps.setdefault(sub, _help(sub))
                for opt in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
                    assert opt in helps[sub], f"README: `sloguard {sub}` has no option {opt}"
            elif "/" in exe and not exe.startswith(("~", "/")):
                assert (ROOT / exe).exists(), f"README names {exe}, which does not exist"
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec scripts/test.sh")


def test_every_benchmark_the_readme_quotes_exists() -> None:
    named = set(re.findall(r"benchmarks/([a-z_]+\.py)", README))
    assert named and all((ROOT / "benchmarks" / n).is_file() for n in named), named


def test_every_readme_link_resolves() -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README links {target}, which does not exist"


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "docs" / "examples").glob("*.yaml")))
def test_the_example_configs_of_the_reference_pass_check(example: str) -> None:
    done = sloguard("check", "-c", f"docs/examples/{example}", cwd=ROOT)
    assert done.returncode == 0, done.stderr
