"""`sloguard config schema`: every key described, durations exported as the strings a config holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
import yaml

from sloguard.cli import main
from sloguard.config.descriptions import DESCRIPTIONS
from sloguard.config.schema import _classes, config_schema
from sloguard.config.spec import Config
from sloguard.config.units import DURATION_PATTERN, parse_duration

SCHEMA = config_schema()


def _properties() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name, model in [("Config", SCHEMA), *SCHEMA["$defs"].items()]:
        for key, prop in model.get("properties", {}).items():
            yield name, key, prop


def test_every_property_has_a_description() -> None:
    missing = [f"{name}.{key}" for name, key, prop in _properties() if not prop.get("description")]
    assert not missing, f"add these keys to sloguard/config/descriptions.py: {missing}"
    assert sum(1 for _ in _properties()) >= 140


def test_the_table_names_only_models_that_exist() -> None:
    assert set(DESCRIPTIONS) <= set(_classes(Config)) | {"NotifierBase"}


def test_duration_defaults_are_strings_equal_to_the_model_defaults() -> None:
    durations = [(n, k, p) for n, k, p in _properties() if p.get("pattern") == DURATION_PATTERN and "default" in p]
    assert len(durations) >= 25
    classes = _classes(Config)
    for name, key, prop in durations:
        assert isinstance(prop["default"], str), (name, key, prop["default"])
        field = next(f for n, f in classes[name].model_fields.items() if (f.alias or n) == key)
        assert parse_duration(prop["default"]) == field.default, (name, key)
    assert SCHEMA["$defs"]["TargetSpec"]["properties"]["scrape_interval"]["default"] == "15s"
    assert SCHEMA["$defs"]["ProbeSettings"]["properties"]["retention"]["default"] == "35d"


def test_every_default_a_editor_inserts_passes_validation() -> None:
    """Insert each model's schema defaults into a minimal item and validate it with the real models."""
    probe = {k: p["default"] for k, p in SCHEMA["$defs"]["ProbeSpec"]["properties"].items() if "default" in p}
    target = {k: p["default"] for k, p in SCHEMA["$defs"]["TargetSpec"]["properties"].items()
              if "default" in p and p["default"] is not None}
    doc = {"version": "sloguard/v1", "targets": [{**target, "name": "t", "api_url": "http://x"}],
           "probes": [{**probe, "name": "p", "target": "t"}]}
    jsonschema.validate(doc, SCHEMA)
    Config.model_validate(doc)


def test_cli_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(SCHEMA)) and printed["title"].startswith("sloguard configuration")
    yaml.safe_dump(printed)  # editors that take YAML schemas can use it as-is
