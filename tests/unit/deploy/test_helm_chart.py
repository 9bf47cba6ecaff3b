"""The Helm chart lints, renders valid Kubernetes and CRD manifests, and matches its golden renders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from sloguard.config.spec import Config

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "helm" / "sloguard"
GOLDEN = ROOT / "tests" / "golden" / "helm"
HELM = ROOT / ".tools" / "bin" / "helm"
CRD_MODELS = ROOT / ".tools" / "validators" / "node_modules" / "@kubernetes-models" / "prometheus-operator"
UPDATE = os.environ.get("SLOGUARD_UPDATE_GOLDEN") == "1"
# name -> values files; "all" turns every toggle on, "deployment" is the cluster-wide mode.
CASES = {"default": (), "all": ("ci/all-values.yaml",), "deployment": ("ci/deployment-values.yaml",)}
KUBE_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())  # Chart.yaml kubeVersion floor, newest
CRD_KINDS = ("ServiceMonitor", "PrometheusRule")
GROUPS_PLACEHOLDER = "<rule groups of alerts/*.yaml: see test_prometheus_rule_carries_alerts_folder>"


def _helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM.is_file(), f"{HELM} is missing: run scripts/setup.sh"
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, cwd=CHART, timeout=60)


def _render(values: tuple[str, ...], *sets: str) -> list[dict[str, Any]]:
    args = ["template", "sloguard", ".", "--namespace", "monitoring"]
    for file in values:
        args += ["-f", file]
    for item in sets:
        args += ["--set", item]
    done = _helm(*args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def renders() -> dict[str, list[dict[str, Any]]]:
    return {name: _render(values) for name, values in CASES.items()}


def _one(docs: list[dict[str, Any]], *kinds: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] in kinds]
    assert len(found) == 1, [d["kind"] for d in docs]
    return found[0]


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = _one(docs, "DaemonSet", "Deployment")["spec"]["template"]["spec"]
    return spec


def _alerts_groups() -> list[Any]:
    groups: list[Any] = []
    for path in sorted((ROOT / "alerts").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text()) or {}
        groups += doc.get("groups", [])
    return groups


@pytest.mark.parametrize("case", CASES)
def test_lint_strict(case: str) -> None:
    args = ["lint", "--strict", "."] + [a for f in CASES[case] for a in ("-f", f)]
    done = _helm(*args)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("case", CASES)
def test_render_matches_golden(case: str, renders: dict[str, list[dict[str, Any]]]) -> None:
    docs = json.loads(json.dumps(renders[case]))  # deep copy
    for doc in docs:
        if doc["kind"] == "PrometheusRule":  # its content belongs to alerts/, which has its own golden test
            doc["spec"]["groups"] = GROUPS_PLACEHOLDER
    text = yaml.safe_dump_all(docs, sort_keys=True, width=110)
    golden = GOLDEN / f"{case}.yaml"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.read_text() == text, f"rerun with SLOGUARD_UPDATE_GOLDEN=1 if the change to {golden} is intended"


def _core_docs(renders: dict[str, list[dict[str, Any]]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for case, docs in renders.items():
        for doc in docs:
            if doc["kind"] not in CRD_KINDS:
                yield case, doc


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_core_manifests_validate_against_kubernetes_schemas(
    version: str, renders: dict[str, list[dict[str, Any]]]
) -> None:
    checked = 0
    for case, doc in _core_docs(renders):
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{case}: {doc['kind']}: {err.message} at {list(err.path)}")
        checked += 1
    assert checked >= 12


def test_crds_validate_against_prometheus_operator_schemas(renders: dict[str, list[dict[str, Any]]]) -> None:
    node = shutil.which("node")
    assert node and CRD_MODELS.is_dir(), "node or @kubernetes-models/prometheus-operator missing: scripts/setup.sh"
    docs = [d for d in renders["all"] if d["kind"] in CRD_KINDS]
    assert sorted(d["kind"] for d in docs) == sorted(CRD_KINDS)
    done = subprocess.run(
        [node, str(Path(__file__).with_name("validate_crds.mjs")), str(CRD_MODELS)],
        input=json.dumps(docs), capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_crds_are_off_by_default(renders: dict[str, list[dict[str, Any]]]) -> None:
    assert not [d for d in renders["default"] if d["kind"] in CRD_KINDS]


def test_prometheus_rule_carries_alerts_folder(renders: dict[str, list[dict[str, Any]]]) -> None:
    expected = _alerts_groups()
    assert expected, "alerts/ holds no rule groups: the PrometheusRule would be empty"
    assert _one(renders["all"], "PrometheusRule")["spec"]["groups"] == expected


@pytest.mark.parametrize("case", CASES)
def test_pod_is_locked_down(case: str, renders: dict[str, list[dict[str, Any]]]) -> None:
    pod = _pod(renders[case])
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/-/healthy"
    assert container["readinessProbe"]["httpGet"]["path"] == "/-/ready"
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


@pytest.mark.parametrize(
    ("case", "kind"), [("default", "DaemonSet"), ("all", "DaemonSet"), ("deployment", "Deployment")]
)
def test_mode_selects_workload_kind(case: str, kind: str, renders: dict[str, list[dict[str, Any]]]) -> None:
    assert _one(renders[case], "DaemonSet", "Deployment")["kind"] == kind


def test_gpu_placement_values_reach_the_pod(renders: dict[str, list[dict[str, Any]]]) -> None:
    pod = _pod(renders["all"])
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in pod["containers"][0]["env"]


@pytest.mark.parametrize("case", CASES)
def test_rendered_config_is_valid_and_matches_the_pod(case: str, renders: dict[str, list[dict[str, Any]]]) -> None:
    docs = renders[case]
    config = Config.model_validate(yaml.safe_load(_one(docs, "ConfigMap")["data"]["sloguard.yaml"]))
    (container,) = _pod(docs)["containers"]
    assert config.listen == f":{container['ports'][0]['containerPort']}"
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert config.state_dir in mounts and "/etc/sloguard/sloguard.yaml" in mounts


def test_secret_files_are_mounted_where_the_config_points(renders: dict[str, list[dict[str, Any]]]) -> None:
    docs = renders["all"]
    config = Config.model_validate(yaml.safe_load(_one(docs, "ConfigMap")["data"]["sloguard.yaml"]))
    keys = set(_one(docs, "Secret")["data"])
    referenced = {config.targets[0].api_key_file, config.notifiers[0].token_file}  # type: ignore[union-attr]
    assert referenced == {f"/etc/sloguard/secrets/{k}" for k in keys}
    plain = yaml.safe_load((CHART / "ci" / "all-values.yaml").read_text())["secrets"]["files"].values()
    rendered_elsewhere = yaml.safe_dump_all([d for d in docs if d["kind"] != "Secret"])
    assert not [v for v in plain if v in rendered_elsewhere]


def test_existing_secret_is_used_without_creating_one(renders: dict[str, list[dict[str, Any]]]) -> None:
    docs = renders["deployment"]
    assert not [d for d in docs if d["kind"] == "Secret"]
    volumes = {v["name"]: v for v in _pod(docs)["volumes"]}
    assert volumes["secrets"]["secret"]["secretName"] == "sloguard-keys"


def test_config_change_rolls_the_pods() -> None:
    def checksum(*sets: str) -> str:
        annotations = _one(_render((), *sets), "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["checksum/config"])

    assert checksum() != checksum("config.evaluation_interval=30s")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("mode=statefulset", "mode must be one of"),
        ("config.targets[0].name=x,config.targets[0].bogus=1", "bogus"),
        ("config.evaluation_interval=15", "config.evaluation_interval"),
        ("config.version=sloguard/v2", "config.version"),
        ("service.port=0", "service.port"),
    ],
)
def test_values_schema_rejects(setting: str, message: str) -> None:
    done = _helm("template", "sloguard", ".", "--set", setting)
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_values_schema_embeds_the_config_spec() -> None:
    """values.schema.json's `config` is Config's JSON schema, so helm rejects a bad sloguard.yaml at install."""
    path = CHART / "values.schema.json"
    schema = json.loads(path.read_text())
    spec = Config.model_json_schema(mode="validation")
    defs = spec.pop("$defs")
    config = {"description": schema["properties"]["config"]["description"], **spec}
    if UPDATE:
        schema["properties"]["config"], schema["$defs"] = config, defs
        path.write_text(json.dumps(schema, indent=2) + "\n")
    assert schema["properties"]["config"] == config and schema["$defs"] == defs
