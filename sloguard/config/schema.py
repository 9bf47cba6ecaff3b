"""`sloguard config schema`: the JSON Schema of the config, with a description on every key.

Descriptions come from the table in descriptions.py; duration defaults are exported as the strings a config
would hold (`"15s"`, not `15.0`, which an editor would insert and `check` would reject).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from sloguard.config.descriptions import describe
from sloguard.config.spec import Config
from sloguard.config.suggest import models_in
from sloguard.config.units import DURATION_PATTERN, format_duration


def _classes(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Return every model reachable from root by class name (the schema's $defs keys)."""
    found: dict[str, type[BaseModel]] = {}
    todo = [root]
    while todo:
        model = todo.pop()
        if model.__name__ in found:
            continue
        found[model.__name__] = model
        for field in model.model_fields.values():
            todo += models_in(field.annotation)
    return found


def _fill(schema: dict[str, Any], model: type[BaseModel]) -> None:
    bases = [c.__name__ for c in model.__mro__ if isinstance(c, type) and issubclass(c, BaseModel)]
    for key, prop in schema.get("properties", {}).items():
        text = describe(bases, key)
        if text is not None and "description" not in prop:
            prop["description"] = text
        if prop.get("pattern") == DURATION_PATTERN and isinstance(prop.get("default"), int | float):
            prop["default"] = format_duration(float(prop["default"]))


def config_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of `sloguard/v1` with descriptions and string durations."""
    schema = Config.model_json_schema(by_alias=True)
    classes = _classes(Config)
    _fill(schema, Config)
    for name, sub in schema.get("$defs", {}).items():
        if name in classes:
            _fill(sub, classes[name])
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "sloguard configuration (version: sloguard/v1)"
    return schema
