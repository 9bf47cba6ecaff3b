"""The CLI answers `--version` like an exporter, and every option of every command says what it is for."""

from __future__ import annotations

import argparse

import pytest

from sloguard import __version__
from sloguard.cli import _parser, main


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"sloguard {__version__}"


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


@pytest.mark.parametrize("command", ["run", "check", "config"])
def test_every_option_has_help_and_the_command_a_description(command: str) -> None:
    sub = _subparsers(_parser())[command]
    assert sub.description, f"`sloguard {command} --help` says nothing about what it does"
    for action in sub._actions:
        assert action.help, f"`sloguard {command}` option {action.option_strings or action.dest} has no help"


def test_inspect_metrics_options_have_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["inspect-metrics", "--help"])
    out = capsys.readouterr().out
    assert "engine map to apply" in out and '"not available"' in out
