"""Config errors carry a fix: "did you mean" for a mistyped key anywhere in the tree, the number for `p95`."""

from __future__ import annotations

import pytest

from sloguard.config.load import ConfigError, load_config_text
from sloguard.config.spec import Config
from sloguard.config.suggest import known_keys


def _errors(text: str) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_config_text("version: sloguard/v1\n" + text)
    return exc.value.errors


@pytest.mark.parametrize(("text", "line"), [
    ("target: []\n", "target: unknown key; did you mean 'targets'?"),
    ("probe_settings: {retension: 1d}\n", "probe_settings.retension: unknown key; did you mean 'retention'?"),
    ("slos: [{name: a, target: b, objectivs: []}]\n",
     "slos[0].objectivs: unknown key; did you mean 'objectives'?"),
    ("slos: [{name: a, target: b, objectives: [{metric: ttft, percentile: 95, treshold: 1s}]}]\n",
     "slos[0].objectives[0].treshold: unknown key; did you mean 'threshold'?"),
    ("notifiers: [{name: x, type: slack, chanel: '#a', token_env: T}]\n",
     "notifiers[0].chanel: unknown key; did you mean 'channel'?"),
    ("notifiers: [{name: x, type: log, grup_by: [a]}]\n",
     "notifiers[0].grup_by: unknown key; did you mean 'group_by'?"),
    ("alerts: [{name: A, expr: 'x > 1', fro: 5m}]\n", "alerts[0].fro: unknown key; did you mean 'for'?"),
    ("gpu: {canary: {enabeld: true}}\n", "gpu.canary.enabeld: unknown key; did you mean 'enabled'?"),
    ("zzz: 1\n", "zzz: unknown key"),
])
def test_unknown_keys_suggest_the_closest_known_one(text: str, line: str) -> None:
    assert line in _errors(text)


@pytest.mark.parametrize(("value", "line"), [
    ("p95", "slos[0].objectives[0].percentile: write the number without 'p': 95, not 'p95'"),
    ("P99.9", "slos[0].objectives[0].percentile: write the number without 'p': 99.9, not 'P99.9'"),
    ("high", "slos[0].objectives[0].percentile: must be a number, got 'high'"),
])
def test_percentile_strings_get_a_plain_message(value: str, line: str) -> None:
    errors = _errors(f"slos: [{{name: a, target: b, objectives: [{{metric: ttft, percentile: {value}, "
                     "threshold: 1s}]}]\n")
    assert line in errors and not any("Input should be" in e for e in errors)


def test_known_keys_follow_lists_unions_and_aliases() -> None:
    assert "for" in known_keys(Config, ["alerts", 0, "x"])
    assert "token_file" in known_keys(Config, ["notifiers", 0, "slack", "x"])
    assert "url_with_secret_file" not in known_keys(Config, ["notifiers", 0, "slack", "x"])
