"""The chart's cluster features: hostPID, API access (discovery, leader election), HA, config checks, monitors."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.helm import CHART, helm, is_hook, one, pod, render
from support.procs import ROOT

UPDATE = os.environ.get("SLOGUARD_UPDATE_GOLDEN") == "1"
READ_ONLY = ["get", "list", "watch"]


def _kinds(docs: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in kinds]


@pytest.mark.parametrize("values", [(), ("ci/all-values.yaml",), ("ci/ha-values.yaml",)])
def test_no_selector_picks_up_the_check_pods(values: tuple[str, ...]) -> None:
    """The Service, monitors and PodDisruptionBudget select the daemon's pods only, never a check pod."""
    docs = render(values)
    checks = [d["metadata"]["labels"] for d in docs if d["kind"] == "Pod"]
    checks += [d["spec"]["template"]["metadata"]["labels"] for d in docs if d["kind"] == "Job"]
    daemon = one(docs, "DaemonSet", "Deployment")["spec"]["template"]["metadata"]["labels"]
    selectors = [one(docs, "Service")["spec"]["selector"]]
    selectors += [d["spec"]["selector"]["matchLabels"] for d in docs
                  if d["kind"] in ("ServiceMonitor", "PodDisruptionBudget")
                  or (d["kind"] == "PodMonitor" and d["metadata"]["name"] == "sloguard")]
    assert checks and selectors
    for selector in selectors:
        assert selector.items() <= daemon.items()
        assert not [c for c in checks if selector.items() <= c.items()]


def test_packaged_alerts_are_copies_of_alerts() -> None:
    """files/alerts is a copy inside the chart (a symlink out of it breaks a chart copied alone): alerts/*.yaml."""
    packaged = CHART / "files" / "alerts"
    if UPDATE:
        shutil.rmtree(packaged, ignore_errors=True)
        packaged.mkdir(parents=True)
        for path in (ROOT / "alerts").glob("*.yaml"):
            shutil.copy(path, packaged / path.name)
    assert not packaged.is_symlink()
    source = {p.name: p.read_bytes() for p in (ROOT / "alerts").glob("*.yaml")}
    copies = {p.name: p.read_bytes() for p in packaged.iterdir()}
    assert copies == source, f"rerun with SLOGUARD_UPDATE_GOLDEN=1 to copy alerts/*.yaml into {packaged}"


def test_packaged_chart_carries_the_alerts(tmp_path: Path) -> None:
    done = helm("package", ".", "--destination", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (archive,) = tmp_path.glob("sloguard-*.tgz")
    shutil.unpack_archive(archive, tmp_path / "x")
    assert (tmp_path / "x" / "sloguard" / "files" / "alerts" / "sloguard-meta.yaml").is_file()


def test_host_pid_is_opt_in() -> None:
    assert "hostPID" not in pod(render(()))
    assert pod(render((), "hostPID=true"))["hostPID"] is True


def test_no_api_access_by_default() -> None:
    docs = render(())
    assert not _kinds(docs, "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    assert pod(docs)["automountServiceAccountToken"] is False
    assert one(docs, "ServiceAccount")["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    ("sets", "namespaces", "rules"),
    [
        (("rbac.discovery.enabled=true",), ["monitoring"], [([""], ["pods"])]),
        (("rbac.discovery.enabled=true", "rbac.discovery.resources={endpointslices}",
          "rbac.discovery.namespaces={a,b}"), ["a", "b"], [(["discovery.k8s.io"], ["endpointslices"])]),
        (("rbac.discovery.enabled=true", "rbac.discovery.resources={pods,endpointslices}"), ["monitoring"],
         [([""], ["pods"]), (["discovery.k8s.io"], ["endpointslices"])]),
    ],
)
def test_discovery_rbac_is_read_only_and_namespaced(
    sets: tuple[str, ...], namespaces: list[str], rules: list[tuple[list[str], list[str]]]
) -> None:
    docs = render((), *sets)
    assert not _kinds(docs, "ClusterRole", "ClusterRoleBinding")
    roles, bindings = _kinds(docs, "Role"), _kinds(docs, "RoleBinding")
    assert [r["metadata"]["namespace"] for r in roles] == namespaces
    for role in roles:
        assert [(r["apiGroups"], r["resources"]) for r in role["rules"]] == rules
        assert all(r["verbs"] == READ_ONLY and "resourceNames" not in r for r in role["rules"])
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sloguard", "namespace": "monitoring"}]
    assert pod(docs)["automountServiceAccountToken"] is True


def test_cluster_wide_discovery_is_one_cluster_role() -> None:
    docs = render((), "rbac.discovery.enabled=true", "rbac.discovery.clusterWide=true")
    (role,) = _kinds(docs, "ClusterRole")
    (binding,) = _kinds(docs, "ClusterRoleBinding")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": READ_ONLY}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == "monitoring-sloguard-discovery"
    assert not _kinds(docs, "Role")


def test_leader_election_may_only_touch_leases_in_its_namespace() -> None:
    docs = render((), "mode=deployment", "replicaCount=2", "rbac.leaderElection.enabled=true")
    (role,) = _kinds(docs, "Role")
    assert role["metadata"]["namespace"] == "monitoring"
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "create", "update"]}]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("rbac.discovery.resources={secrets}",), "rbac.discovery.resources"),
        (("rbac.discovery.namespaces={Bad_NS}",), "rbac.discovery.namespaces"),
        (("rbac.discovery.verbs={create}",), "verbs"),
    ],
)
def test_rbac_values_reject(sets: tuple[str, ...], message: str) -> None:
    done = helm("template", "sloguard", ".", *[a for s in sets for a in ("--set", s)])
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_ha_rolls_one_at_a_time_keeps_one_up_and_spreads() -> None:
    docs = render((), "mode=deployment", "replicaCount=2")
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    assert one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    term = pod(docs)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    single = render((), "mode=deployment")
    assert one(single, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    assert not _kinds(single, "PodDisruptionBudget") and "affinity" not in pod(single)
    own = render((), "mode=deployment", "replicaCount=2", "affinity.nodeAffinity.x=1")
    assert pod(own)["affinity"] == {"nodeAffinity": {"x": 1}}  # the user's affinity replaces the default


def test_downward_env_names_the_node_for_discovery() -> None:
    env = {e["name"]: e for e in pod(render(()))["containers"][0]["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert {"POD_NAME", "POD_NAMESPACE", "NVIDIA_VISIBLE_DEVICES"} <= set(env)


def test_config_check_hook_runs_before_pods_are_replaced() -> None:
    docs = render(("ci/all-values.yaml",))
    hooks = [d for d in docs if is_hook(d) and d["metadata"]["annotations"]["helm.sh/hook"] != "test"]
    config, job = sorted(hooks, key=lambda d: str(d["kind"]))
    assert config["kind"] == "ConfigMap" and job["kind"] == "Job"
    for doc in hooks:
        assert doc["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert int(config["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        job["metadata"]["annotations"]["helm.sh/hook-weight"])
    assert config["data"] == one(docs, "ConfigMap")["data"]  # the config being installed, checked first
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["args"] == ["check", "-c", "/etc/sloguard/sloguard.yaml"]
    assert container["image"] == pod(docs)["containers"][0]["image"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["automountServiceAccountToken"] is False
    assert "secrets" not in {v["name"] for v in spec["volumes"]}  # a new release's Secret does not exist yet
    assert job["spec"]["backoffLimit"] == 0
    assert not [d for d in render((), "configCheck.enabled=false") if d["kind"] == "Job"]


@pytest.mark.parametrize(("values", "online"), [((), False), (("ci/all-values.yaml",), True)])
def test_helm_test_checks_config_and_secrets(values: tuple[str, ...], online: bool) -> None:
    docs = render(values)
    (test,) = [d for d in docs if d["kind"] == "Pod"]
    assert test["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = test["spec"]["containers"]
    expected = ["check", "-c", "/etc/sloguard/sloguard.yaml", "--secrets"] + (["--online"] if online else [])
    assert container["args"] == expected
    volumes = {v["name"]: v for v in test["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == one(docs, "ConfigMap")["metadata"]["name"]
    assert ("secrets" in volumes) is online  # all-values has secrets, the default has none


def test_pod_monitor_and_engine_monitors() -> None:
    docs = render(("ci/all-values.yaml",))
    monitors = {d["metadata"]["name"]: d for d in _kinds(docs, "PodMonitor")}
    own, engine = monitors["sloguard"], monitors["sloguard-vllm"]
    assert own["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
    assert own["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "sloguard"
    assert engine["spec"]["selector"] == {"matchLabels": {"app": "vllm"}}
    assert engine["spec"]["namespaceSelector"] == {"matchNames": ["inference"]}
    assert "honorLabels" not in engine["spec"]["podMetricsEndpoints"][0]
    assert not _kinds(render(()), "PodMonitor")


def test_extra_volumes_reach_the_daemon_container() -> None:
    spec = pod(render(("ci/all-values.yaml",)))
    assert {"name": "vllm-run", "mountPath": "/run/vllm", "readOnly": True} in spec["containers"][0]["volumeMounts"]
    assert "vllm-run" in {v["name"] for v in spec["volumes"]}


def _mib(quantity: str) -> float:
    assert quantity.endswith("Mi"), quantity
    return float(quantity[:-2])


def test_memory_follows_the_measured_figures() -> None:
    """Request >= the typical pod, limit >= 1.5 x the worst high-water sum (docs/kubernetes.md, "Memory")."""
    doc = (ROOT / "docs" / "kubernetes.md").read_text()
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in ("typical", "worst"):
            rows[cells[0]] = cells
    typical_rss, worst_hwm = float(rows["typical"][2]), float(rows["worst"][4])
    resources = pod(render(()))["containers"][0]["resources"]
    assert _mib(resources["requests"]["memory"]) >= typical_rss
    assert _mib(resources["limits"]["memory"]) >= 1.5 * worst_hwm
