"""docs/kubernetes.md says what the chart does: its values examples render, every value it names exists."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from support.helm import CHART, pod, render
from support.procs import ROOT

from sloguard.config.spec import Config

DOC = (ROOT / "docs" / "kubernetes.md").read_text()
SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def _yaml_blocks() -> list[Any]:
    """Return every YAML document of the page's yaml blocks (an RBAC block holds several)."""
    return [d for block in re.findall(r"```yaml\n(.*?)```", DOC, re.S) for d in yaml.safe_load_all(block)]


def test_the_values_example_installs_a_valid_release(tmp_path: Path) -> None:
    values = next(b for b in _yaml_blocks() if isinstance(b, dict) and "image" in b)  # the install's values
    assert values["image"]["repository"] and values["config"]["targets"]
    path = tmp_path / "my-values.yaml"
    path.write_text(yaml.safe_dump(values))
    docs = render((str(path),))
    for doc in docs:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    config = yaml.safe_load(next(d for d in docs if d["kind"] == "ConfigMap")["data"]["sloguard.yaml"])
    Config.model_validate(config)
    assert pod(docs)["hostNetwork"] is True


def test_the_host_pid_example_renders(tmp_path: Path) -> None:
    values = next(b for b in _yaml_blocks() if isinstance(b, dict) and "hostPID" in b)
    path = tmp_path / "pid.yaml"
    path.write_text(yaml.safe_dump(values))
    spec = pod(render((str(path),)))
    assert spec["hostPID"] is True and "vllm-run" in {v["name"] for v in spec["volumes"]}


def _resolves(path: str) -> bool:
    node: dict[str, Any] = SCHEMA
    for part in path.split("."):
        if "properties" not in node:  # a free-form object (resources.limits, affinity): any key
            return node.get("type") == "object"
        if part not in node["properties"]:
            return False
        node = node["properties"][part]
    return True


def test_every_value_the_page_names_exists() -> None:
    top = set(SCHEMA["properties"]) - {"config"}
    named = {m for m in re.findall(r"`([a-zA-Z]+(?:\.[a-zA-Z]+)*)(?:: [^`]*)?`", DOC) if m.split(".")[0] in top}
    assert {"hostPID", "rbac.discovery.clusterWide", "configCheck.enabled", "helmTest.online"} <= named
    assert [n for n in named if not _resolves(n)] == []
