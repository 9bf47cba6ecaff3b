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
from support.helm import CHART, HELM, TEST_IMAGE
from support.helm import helm as _helm
from support.helm import one as _one
from support.helm import pod as _pod
from support.helm import render as _render
from support.procs import ROOT

from sloguard.config.load import load_config
from sloguard.config.schema import config_schema
from sloguard.config.spec import Config
from sloguard.rulegen.prometheus import generate

GOLDEN = ROOT / "tests" / "golden" / "helm"
CRD_MODELS = ROOT / ".tools" / "validators" / "node_modules" / "@kubernetes-models" / "prometheus-operator"
UPDATE = os.environ.get("SLOGUARD_UPDATE_GOLDEN") == "1"
# name -> values files; "all" turns every toggle on, "deployment" is the cluster-wide mode, "ha" two replicas
# with cluster-wide discovery and leader election.
CASES = {"default": (), "all": ("ci/all-values.yaml",), "deployment": ("ci/deployment-values.yaml",),
         "ha": ("ci/ha-values.yaml",)}
KUBE_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())  # Chart.yaml kubeVersion floor, newest
CRD_KINDS = ("ServiceMonitor", "PodMonitor", "PrometheusRule")
GROUPS_PLACEHOLDER = "<rule groups: see the test_prometheus_rule_* tests>"


@pytest.fixture(scope="module")
def renders() -> dict[str, list[dict[str, Any]]]:
    return {name: _render(values) for name, values in CASES.items()}


def _values(case: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for file in CASES[case]:
        values.update(yaml.safe_load((CHART / file).read_text()))
    return values


def _alerts_groups(*, meta: bool) -> list[Any]:
    """Rule groups of alerts/: the hand-written sloguard-meta.yaml, or the files generated from the example."""
    groups: list[Any] = []
    for path in sorted((ROOT / "alerts").glob("*.yaml")):
        if (path.name == "sloguard-meta.yaml") == meta:
            groups += (yaml.safe_load(path.read_text()) or {}).get("groups", [])
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
    assert checked >= 30


def test_crds_validate_against_prometheus_operator_schemas(renders: dict[str, list[dict[str, Any]]]) -> None:
    node = shutil.which("node")
    assert node and CRD_MODELS.is_dir(), "node or @kubernetes-models/prometheus-operator missing: scripts/setup.sh"
    docs = [d for d in renders["all"] if d["kind"] in CRD_KINDS]
    assert sorted({d["kind"] for d in docs}) == sorted(CRD_KINDS)
    done = subprocess.run(
        [node, str(Path(__file__).with_name("validate_crds.mjs")), str(CRD_MODELS)],
        input=json.dumps(docs), capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_crds_are_off_by_default(renders: dict[str, list[dict[str, Any]]]) -> None:
    assert not [d for d in renders["default"] if d["kind"] in CRD_KINDS]


def _rule_groups(docs: list[dict[str, Any]]) -> list[Any]:
    groups: list[Any] = _one(docs, "PrometheusRule")["spec"]["groups"]
    return groups


def test_prometheus_rule_defaults_to_operational_rules_only() -> None:
    """The example config's SLO rules (slo="chat-latency") must not land in a user's Prometheus by default."""
    groups = _rule_groups(_render((), "prometheusRule.enabled=true"))
    assert groups == _alerts_groups(meta=True) and groups
    assert "chat-latency" not in json.dumps(groups)


def test_prometheus_rule_carries_example_and_user_groups(renders: dict[str, list[dict[str, Any]]]) -> None:
    example = _alerts_groups(meta=False)
    assert example, "alerts/ holds no generated rule groups"
    user = yaml.safe_load((CHART / "ci" / "all-values.yaml").read_text())["prometheusRule"]["groups"]
    assert _rule_groups(renders["all"]) == _alerts_groups(meta=True) + example + user
    # Prometheus templates in user rules pass through helm untouched.
    assert "{{ $labels.target }}" in user[0]["rules"][0]["annotations"]["summary"]


def test_prometheus_rule_takes_sloguard_rules_output(tmp_path: Path) -> None:
    """The documented flow: `sloguard rules` for the release's own config, its groups as prometheusRule.groups."""
    values = yaml.safe_load((CHART / "ci" / "all-values.yaml").read_text())
    config = tmp_path / "sloguard.yaml"
    values["config"]["slos"][0]["name"] = "release-slo"
    config.write_text(yaml.safe_dump(values["config"]))
    files = generate(load_config(config), config.name)
    generated = [g for _, text in sorted(files.items()) for g in yaml.safe_load(text)["groups"]]
    rules_values = tmp_path / "rules-values.yaml"
    rules_values.write_text(yaml.safe_dump({"prometheusRule": {"groups": generated}}))
    groups = _rule_groups(
        _render(("ci/all-values.yaml", str(rules_values)), "prometheusRule.includeExampleRules=false")
    )
    assert groups == _alerts_groups(meta=True) + generated
    assert 'slo=\\"release-slo\\"' in json.dumps(groups) and "chat-latency" not in json.dumps(groups)


def test_prometheus_rule_rejects_duplicate_groups(tmp_path: Path) -> None:
    dup = tmp_path / "dup.yaml"
    dup.write_text(yaml.safe_dump({"prometheusRule": {"enabled": True, "groups": _alerts_groups(meta=True)}}))
    done = _helm("template", "sloguard", ".", "-f", str(dup))
    assert done.returncode != 0 and "appears twice" in done.stderr, done.stderr


@pytest.mark.parametrize("case", CASES)
def test_pod_is_locked_down(case: str, renders: dict[str, list[dict[str, Any]]]) -> None:
    pod = _pod(renders[case])
    (container,) = pod["containers"]
    sc = container["securityContext"]
    api = case in ("ha",) or bool(_values(case).get("rbac", {}).get("discovery", {}).get("enabled"))
    assert pod["automountServiceAccountToken"] is api  # a token only for discovery / leader election
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/-/healthy"
    assert container["readinessProbe"]["httpGet"]["path"] == "/-/ready"
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


@pytest.mark.parametrize(
    ("case", "kind"), [("default", "DaemonSet"), ("all", "DaemonSet"), ("deployment", "Deployment"),
                        ("ha", "Deployment")]
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
    spec = config_schema()
    del spec["$schema"], spec["title"]
    defs = spec.pop("$defs")
    config = {"description": schema["properties"]["config"]["description"], **spec}
    if UPDATE:
        schema["properties"]["config"], schema["$defs"] = config, defs
        path.write_text(json.dumps(schema, indent=2) + "\n")
    assert schema["properties"]["config"] == config and schema["$defs"] == defs


def _init_containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    containers: list[dict[str, Any]] = _pod(docs).get("initContainers", [])
    return containers


def _state_volume(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (volume,) = [v for v in _pod(docs)["volumes"] if v["name"] == "state"]
    return volume


@pytest.mark.parametrize("case", ["default", "all"])
def test_hostpath_state_is_chowned_by_a_minimal_init_container(
    case: str, renders: dict[str, list[dict[str, Any]]]
) -> None:
    """The kubelet creates the hostPath root-owned and fsGroup skips it: without the chown SQLite cannot start."""
    docs = renders[case]
    assert _state_volume(docs)["hostPath"]["type"] == "DirectoryOrCreate"
    pod = _pod(docs)
    (init,) = _init_containers(docs)
    user, group = pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]
    assert init["command"] == ["chown", f"{user}:{group}", "/var/lib/sloguard"]  # the directory only, no -R
    assert init["image"] == pod["containers"][0]["image"]
    assert init["securityContext"] == {
        "runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True, "privileged": False, "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
    }
    assert init["volumeMounts"] == [{"name": "state", "mountPath": "/var/lib/sloguard"}]
    assert init["resources"]["limits"]["memory"]


def test_default_hostpath_is_per_release(renders: dict[str, list[dict[str, Any]]]) -> None:
    assert _state_volume(renders["default"])["hostPath"]["path"] == "/var/lib/sloguard/monitoring-sloguard"
    assert _state_volume(renders["all"])["hostPath"]["path"] == "/var/lib/sloguard"


@pytest.mark.parametrize(
    ("sets", "volume"),
    [
        (("state.type=emptyDir",), "emptyDir"),
        (("state.chownInit=false",), "hostPath"),
        (("mode=deployment",), "emptyDir"),
        (("mode=deployment", "state.type=pvc", "state.existingClaim=my-claim"), "persistentVolumeClaim"),
    ],
)
def test_no_init_container_without_hostpath_chown(sets: tuple[str, ...], volume: str) -> None:
    docs = _render((), *sets)
    assert volume in _state_volume(docs)
    assert _init_containers(docs) == []


def test_deployment_pvc_state(renders: dict[str, list[dict[str, Any]]]) -> None:
    docs = renders["deployment"]
    claim = _one(docs, "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert claim["spec"]["storageClassName"] == "standard" and claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert _state_volume(docs)["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert _one(docs, "Deployment")["spec"]["strategy"]["type"] == "Recreate"  # RWO: detach before attach
    existing = _render(("ci/deployment-values.yaml",), "state.existingClaim=my-claim")
    assert not [d for d in existing if d["kind"] == "PersistentVolumeClaim"]
    assert _state_volume(existing)["persistentVolumeClaim"]["claimName"] == "my-claim"


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("state.type=pvc",), "needs mode=deployment"),
        (("mode=deployment", "state.type=pvc", "replicaCount=2"), "needs replicaCount=1"),
        (("state.type=tmpfs",), "state.type must be one of"),
        (("state.hostPath=relative/dir",), "state.hostPath"),
    ],
)
def test_state_rejects(sets: tuple[str, ...], message: str) -> None:
    args = ["template", "sloguard", "."] + [a for s in sets for a in ("--set", s)]
    done = _helm(*args)
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_host_network_for_node_local_engines(renders: dict[str, list[dict[str, Any]]]) -> None:
    pod = _pod(renders["all"])
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert "hostNetwork" not in _pod(renders["default"])


def _notes(tmp_path: Path, *values: str) -> str:
    """Render NOTES.txt (helm template skips it): a copy of the chart renders it through tpl into a ConfigMap."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart, symlinks=False)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "files" / "NOTES.txt")
    (chart / "templates" / "notes.yaml").write_text(
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n'
        'data: {notes: {{ tpl (.Files.Get "files/NOTES.txt") . | quote }}}\n'
    )
    args = [str(HELM), "template", "sloguard", ".", "--show-only", "templates/notes.yaml",
            "--set", f"image.repository={TEST_IMAGE}"]
    args += [a for v in values for a in ("-f", str(CHART / v))]
    done = subprocess.run(args, capture_output=True, text=True, cwd=chart, timeout=60)
    assert done.returncode == 0, done.stderr
    notes: str = yaml.safe_load(done.stdout)["data"]["notes"]
    return notes


def test_notes_warn_about_lost_state_and_per_node_pages(tmp_path: Path) -> None:
    default = _notes(tmp_path / "default")
    assert "hostPath /var/lib/sloguard/default-sloguard on each node" in default
    assert "pages once per node" not in default  # no notifiers configured
    assert "PersistentVolumeClaim sloguard-state" in _notes(tmp_path / "pvc", "ci/deployment-values.yaml")
    everything = _notes(tmp_path / "all", "ci/all-values.yaml")
    assert "pages once per node" in everything  # a DaemonSet with notifiers
    assert "1 rule group(s) from prometheusRule.groups" in everything
    emptydir = tmp_path / "emptydir.yaml"
    emptydir.write_text("mode: deployment\n")
    assert "LOST whenever the pod is replaced" in _notes(tmp_path / "emptydir", str(emptydir))
    assert "hostPID is false" not in everything  # all-values sets hostPID with host.processes
    no_pid = tmp_path / "no-pid.yaml"
    no_pid.write_text("config: {host: {processes: [{name: vllm, process_name: vllm}]}}\n")
    assert "config.host.processes is set but hostPID is false" in _notes(tmp_path / "no-pid", str(no_pid))
    assert "hostPID is false" not in default


def test_no_default_image_fails_with_a_clear_message() -> None:
    """No public image exists: rendering (template, or install before it applies) says how to build and set one."""
    done = _helm("template", "sloguard", ".", image=False)
    assert done.returncode != 0
    assert "image.repository is required: no public sloguard image exists" in done.stderr, done.stderr
    assert "docker build" in done.stderr and "--set image.repository=" in done.stderr


def test_the_image_is_the_one_set() -> None:
    pod = _pod(_render((), "image.tag=1.2.3"))
    images = {c["image"] for c in pod["containers"] + pod.get("initContainers", [])}
    assert images == {f"{TEST_IMAGE}:1.2.3"}
