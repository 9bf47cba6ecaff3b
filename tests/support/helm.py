"""Render the Helm chart with the real helm binary and pick resources out of the render."""

from __future__ import annotations

import subprocess
from typing import Any

import yaml

from support.procs import ROOT

CHART = ROOT / "helm" / "sloguard"
HELM = ROOT / ".tools" / "bin" / "helm"
TEST_IMAGE = "registry.example.com/sloguard"


def helm(*args: str, image: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm in the chart; template and lint get the test image (the chart has no default: none exists)."""
    assert HELM.is_file(), f"{HELM} is missing: run scripts/setup.sh"
    extra = ["--set", f"image.repository={TEST_IMAGE}"] if image and args and args[0] in ("template", "lint") else []
    return subprocess.run([str(HELM), *args, *extra], capture_output=True, text=True, cwd=CHART, timeout=60)


def render(values: tuple[str, ...], *sets: str) -> list[dict[str, Any]]:
    """Return the documents of `helm template` (hooks and tests included) in namespace monitoring."""
    args = ["template", "sloguard", ".", "--namespace", "monitoring"]
    for file in values:
        args += ["-f", file]
    for item in sets:
        args += ["--set", item]
    done = helm(*args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def is_hook(doc: dict[str, Any]) -> bool:
    """Whether a document is a helm hook or test, not a release resource."""
    return "helm.sh/hook" in (doc["metadata"].get("annotations") or {})


def one(docs: list[dict[str, Any]], *kinds: str) -> dict[str, Any]:
    """Return the one release resource (not a hook or test) of these kinds."""
    found = [d for d in docs if d["kind"] in kinds and not is_hook(d)]
    assert len(found) == 1, [d["kind"] for d in docs]
    return found[0]


def pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the workload's pod spec."""
    spec: dict[str, Any] = one(docs, "DaemonSet", "Deployment")["spec"]["template"]["spec"]
    return spec
