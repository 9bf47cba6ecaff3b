"""YAML aliases are limited (count and expanded size) before anything is built; error lines never repr the input."""

from __future__ import annotations

import tracemalloc
from itertools import pairwise

import pytest

from sloguard.config.files import MAX_ALIASES, FileError, parse_yaml
from sloguard.config.load import ConfigError, load_config_text

LOL = '["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'


def alias_bomb(levels: int = 9) -> str:
    """The billion-laughs document: `levels` lists of 9 aliases to the one before (9^levels nodes expanded)."""
    lines = ["version: sloguard/v1", f"a: &a {LOL}"]
    for prev, name in pairwise("abcdefghijklmnop"[:levels]):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join([*lines, f"log: {{format: *{'abcdefghijklmnop'[levels - 1]}}}"]) + "\n"  # quoted by errors


@pytest.mark.parametrize(("text", "problem"), [
    (alias_bomb(), "its aliases would add more than 100000 nodes (an alias bomb?)"),
    ("a: &a [*a]\n", "an alias refers to a node that contains it"),
    ("a: &a 1\nb: [" + ",".join(["*a"] * (MAX_ALIASES + 1)) + "]\n", f"more than {MAX_ALIASES} aliases"),
])
def test_alias_limits(text: str, problem: str) -> None:
    tracemalloc.start()
    with pytest.raises(FileError) as err:
        parse_yaml(text, "bomb.yaml")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert str(err.value) == f"bomb.yaml: not valid YAML: {problem}"
    assert peak < 8 << 20  # nothing was expanded


def test_ordinary_anchors_and_merge_keys_still_work() -> None:
    doc = parse_yaml("base: &b {interval: 5s, timeout: 2s}\np: {<<: *b, timeout: 1s}\nq: [*b, *b]\n", "x")
    assert doc["p"] == {"interval": "5s", "timeout": "1s"} and doc["q"] == [doc["base"], doc["base"]]


@pytest.mark.parametrize("text", [
    "version: sloguard/v1\nlog: {format: " + "[" + ",".join(["x" * 1000] * 1000) + "]}\n",  # a list where a word goes
    "version: sloguard/v1\nlog: {format: '" + "y" * 1_000_000 + "'}\n",
    "version: sloguard/v1\nevaluation_interval: '" + "9" * 100_000 + "'\n",
    'version: sloguard/v1\n"' + "k\\e" * 50_000 + '": 1\n',  # a key with 50,000 escape bytes (YAML "\e")
    "version: sloguard/v1\nevaluation_interval: " + "9" * 4000 + "\n",
])
def test_error_lines_quote_at_most_a_few_characters_of_the_input(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config_text(text, "c.yaml")
    for line in err.value.errors:
        assert len(line) < 400, line[:200]
        assert "\x1b" not in line
