"""The configuration reference page (docs/config-reference.md), generated from `sloguard config schema`.

One section per object, titled by its YAML path (`slos[].goodput`), one row per key: type, default,
description and an example. Examples are the values the shipped configs use (`sloguard.example.yaml` and the
others in EXAMPLE_FILES, all checked by `sloguard check` in the tests), else the schema's own examples, else
the default; a key none of these give an example for says so.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from sloguard.config.schema import config_schema

EXAMPLE_FILES = ("sloguard.example.yaml", "systemd/sloguard.yaml", "docs/examples/more-keys.yaml",
                 "docs/examples/ha-file-lock.yaml")
Schema = Mapping[str, Any]


def _ref(node: Schema) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[1] if isinstance(ref, str) else None


def _options(node: Schema) -> list[Schema]:
    """Return the alternatives of a union (anyOf/oneOf), the node itself otherwise; null left out."""
    alts = node.get("anyOf") or node.get("oneOf")
    return [a for a in alts if a.get("type") != "null"] if alts else [node]


def _objects(node: Schema) -> Iterator[tuple[str, str]]:
    """Yield (class, path suffix) of every object a property holds: itself, list items, map values."""
    for alt in _options(node):
        if (name := _ref(alt)) is not None:
            yield name, ""
        elif alt.get("type") == "array" and isinstance(alt.get("items"), dict):
            yield from ((n, "[]" + s) for n, s in _objects(alt["items"]))
        elif isinstance(alt.get("additionalProperties"), dict):
            yield from ((n, ".*" + s) for n, s in _objects(alt["additionalProperties"]))


def sections(schema: Schema) -> list[tuple[str, str, Schema]]:
    """Return (path, class, object schema) of every object, breadth-first from the root in key order."""
    defs = schema.get("$defs", {})
    out: list[tuple[str, str, Schema]] = [("", "Config", schema)]
    seen = {"Config"}
    i = 0
    while i < len(out):
        path, _, obj = out[i]
        i += 1
        for key, prop in obj.get("properties", {}).items():
            for name, suffix in _objects(prop):
                if name not in seen and name in defs:
                    seen.add(name)
                    out.append((f"{path}.{key}{suffix}".lstrip("."), name, defs[name]))
    return out


def _type(node: Schema, paths: Mapping[str, str]) -> str:
    alts = _options(node)
    optional = len(alts) < len(node.get("anyOf") or node.get("oneOf") or alts)
    text = " or ".join(_one_type(a, paths) for a in alts)
    return f"{text} (optional)" if optional and "default" in node and node["default"] is None else text


def _one_type(node: Schema, paths: Mapping[str, str]) -> str:
    if (name := _ref(node)) is not None:
        return f"[{paths.get(name, name)}](#{_anchor(paths.get(name, name))})"
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    kind = node.get("type", "any")
    if node.get("pattern", "").startswith("^((\\d+"):
        return "duration"
    if kind == "array":
        items = node.get("items")
        return "list of " + (_type(items, paths) if isinstance(items, dict) else "any")
    if kind == "object":
        values = node.get("additionalProperties")
        keys = node.get("propertyNames", {}).get("enum")
        into = f" ({', '.join(f'`{k}`' for k in keys)})" if keys else ""
        return f"map{into} of " + (_type(values, paths) if isinstance(values, dict) else "string")
    return str(kind)


def _anchor(title: str) -> str:
    """Return the heading id MkDocs gives a section of this title (Python-Markdown toc's slugify)."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def _title(path: str, obj: Schema) -> str:
    """Return a section's title: its YAML path, and the `type` it is for where a list mixes kinds."""
    kind = obj.get("properties", {}).get("type", {})
    kinds = [kind["const"]] if "const" in kind else kind.get("enum", [])
    return (path or "top-level keys") + (f" (type: {' or '.join(kinds)})" if kinds else "")


def _yaml(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, allow_unicode=True).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def examples(root: Path, schema: Schema) -> dict[tuple[str, str], Any]:
    """Return (class, key) -> the first value the shipped example configs give that key."""
    defs = schema.get("$defs", {})
    found: dict[tuple[str, str], Any] = {}

    def walk(obj: Schema, name: str, value: Any) -> None:
        if not isinstance(value, dict):
            return
        for key, v in value.items():
            prop = obj.get("properties", {}).get(key)
            if prop is None:
                continue
            found.setdefault((name, key), v)
            for cls, suffix in _objects(prop):
                for item in _unwrap(v, suffix):
                    if _fits(defs[cls], item):
                        walk(defs[cls], cls, item)

    for rel in EXAMPLE_FILES:
        path = root / rel
        if path.is_file():
            walk(schema, "Config", yaml.safe_load(path.read_text(encoding="utf-8")))
    return found


def _unwrap(value: Any, suffix: str) -> list[Any]:
    """Return the objects a value holds along a path suffix (`[]`, `.*`)."""
    values = [value]
    for part in suffix.replace("[]", " []").replace(".*", " .*").split():
        values = [x for v in values for x in (v if part == "[]" and isinstance(v, list) else
                                              v.values() if part == ".*" and isinstance(v, dict) else [])]
    return values


def _fits(obj: Schema, value: Any) -> bool:
    """Return whether an example value can be an instance of an object (a discriminated union's member)."""
    if not isinstance(value, dict):
        return False
    props = obj.get("properties", {})
    const = props.get("type", {}).get("const") or props.get("type", {}).get("enum")
    if const is not None and value.get("type") not in (const if isinstance(const, list) else [const]):
        return False
    return set(value) <= set(props)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _example(node: Schema, given: Any, has_given: bool) -> str:
    if has_given:
        return f"`{_cell(_yaml(given))}`"
    if node.get("examples"):
        return f"`{_cell(_yaml(node['examples'][0]))}`"
    if node.get("default") not in (None, [], {}, ""):
        return f"`{_cell(_yaml(node['default']))}`"
    return "—"


def markdown(root: Path) -> str:
    """Return the whole reference page for the schema and the example configs under `root` (the repository)."""
    schema = config_schema()
    secs = sections(schema)
    paths = {name: _title(path, obj) for path, name, obj in secs}
    given = examples(root, schema)
    lines = ["# Configuration reference", "",
             "Every key of a `version: sloguard/v1` file, generated from `sloguard config schema` (the JSON Schema "
             "editors use for completion) by `sloguard/config/reference.py`; a test fails when this page and the "
             "schema differ (`SLOGUARD_UPDATE_GOLDEN=1` rewrites it). Durations are strings such as `250ms`, "
             "`30s`, `5m`, `1h30m`, `28d`. Examples are the values the shipped configs use "
             "(`sloguard.example.yaml`, `systemd/sloguard.yaml`, and for the keys those leave out "
             "[examples/more-keys.yaml](examples/more-keys.yaml)) where they set the key. `sloguard check -c FILE` "
             "validates a file against exactly this, naming the path of every error.", ""]
    for path, cls, obj in secs:
        required = set(obj.get("required", ()))
        lines += [f"## {paths[cls]}", ""]
        if obj.get("description") and path:
            lines += [_cell(obj["description"]), ""]
        lines += ["| key | type | default | description | example |", "| --- | --- | --- | --- | --- |"]
        for key, prop in obj.get("properties", {}).items():
            default = "required" if key in required else (
                "—" if prop.get("default") in (None, [], {}) else f"`{_cell(_yaml(prop['default']))}`")
            ex = ("the section" if any(True for _ in _objects(prop)) else
                  _example(prop, given.get((cls, key)), (cls, key) in given))
            lines.append(f"| `{key}` | {_cell(_type(prop, paths))} | {default} | "
                         f"{_cell(prop.get('description', ''))} | {ex} |")
        lines.append("")
    return "\n".join(lines)
