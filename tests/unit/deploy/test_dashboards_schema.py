"""The Grafana dashboards validate against @grafana/schema's Dashboard type and provision without edits."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from sloguard.config.spec import ProbeSpec

ROOT = Path(__file__).resolve().parents[3]
DASHBOARDS = ROOT / "dashboards"
GRAFANA_TYPES = (ROOT / ".tools" / "grafana-schema" / "node_modules" / "@grafana" / "schema" / "dist")
GENERATOR = ROOT / ".tools" / "validators" / "node_modules" / ".bin" / "ts-json-schema-generator"
DS = {"type": "prometheus", "uid": "${datasource}"}
FILES = ("slo-overview.json", "latency-breakdown.json", "gpu-serving.json")


def load_build() -> ModuleType:
    """Import dashboards/build.py (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("sloguard_dashboards_build", DASHBOARDS / "build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def grafana_schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Generate the JSON schema of Grafana's `Dashboard` type from the installed @grafana/schema types."""
    types = GRAFANA_TYPES / "types" / "raw" / "dashboard" / "x" / "types.gen.d.ts"
    assert types.is_file() and GENERATOR.is_file(), "@grafana/schema or ts-json-schema-generator: scripts/setup.sh"
    out = tmp_path_factory.mktemp("grafana") / "dashboard.schema.json"
    done = subprocess.run([str(GENERATOR), "-p", str(types), "-t", "Dashboard", "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    schema: dict[str, Any] = json.loads(out.read_text())
    assert schema["definitions"]["Panel"]["additionalProperties"] is False  # the check is strict
    return schema


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DASHBOARDS / name).read_text())
    return data


@pytest.mark.parametrize("name", FILES)
def test_validates_against_grafana_schema(name: str, grafana_schema: dict[str, Any]) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}"
              for e in jsonschema.Draft7Validator(grafana_schema).iter_errors(_load(name))]
    assert errors == []


def test_schema_rejects_a_broken_dashboard(grafana_schema: dict[str, Any]) -> None:
    broken = _load(FILES[0]) | {"schemaVersion": "42"}
    broken["panels"][0]["gridpos"] = broken["panels"][0].pop("gridPos")
    assert len(list(jsonschema.Draft7Validator(grafana_schema).iter_errors(broken))) >= 2


def test_files_are_what_build_py_generates() -> None:
    build = load_build()
    assert sorted(build.DASHBOARDS) == sorted(FILES)
    for name, dashboard in build.DASHBOARDS.items():
        assert (DASHBOARDS / name).read_text() == build.text(dashboard), "run python dashboards/build.py"


def test_schema_version_is_grafana_schema_default() -> None:
    source = (GRAFANA_TYPES / "esm" / "raw" / "dashboard" / "x" / "types.gen.mjs").read_text()
    match = re.search(r"schemaVersion: (\d+)", source)
    assert match
    for name in FILES:
        assert _load(name)["schemaVersion"] == int(match.group(1))


def test_uids_are_fixed_and_unique() -> None:
    uids = [_load(name)["uid"] for name in FILES]
    assert len(set(uids)) == len(FILES) and all(re.fullmatch(r"sloguard-[a-z-]+", u) for u in uids)


@pytest.mark.parametrize("name", FILES)
def test_provisioning_needs_no_edits(name: str) -> None:
    raw = (DASHBOARDS / name).read_text()
    dashboard = _load(name)
    assert "${DS_" not in raw and "__inputs" not in dashboard
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert {"target", "model", "slo"} <= set(variables)
    for var in variables.values():
        if var["type"] == "query":
            assert var["datasource"] == DS and var["query"]["query"].startswith("label_values(")
    for panel in dashboard["panels"]:
        if panel["type"] == "row":  # a section header: no queries of its own
            assert "targets" not in panel and panel["gridPos"]["w"] == 24
            continue
        assert panel["datasource"] == DS, panel["title"]
        assert panel["targets"] and all(t["datasource"] == DS and t["expr"] for t in panel["targets"])


@pytest.mark.parametrize("name", FILES)
def test_layout_fits_and_does_not_overlap(name: str) -> None:
    taken: set[tuple[int, int]] = set()
    panels = _load(name)["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & taken, p["title"]
        taken |= cells


PROMQL_WORDS = frozenset({"sum", "max", "count", "rate", "increase", "histogram_quantile"})


def metric_names(expr: str) -> set[str]:
    """Return the metric names of a PromQL expression (the subset of PromQL the dashboards use)."""
    for pattern in (r'"[^"]*"', r"\{[^}]*\}", r"\[[^\]]*\]", r"\b(?:by|on|group_left|without)\s*\([^)]*\)"):
        expr = re.sub(pattern, " ", expr)
    return {w for w in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr) if w not in PROMQL_WORDS}


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (le) (rate(sloguard_probe_ttft_seconds_bucket{target=~"$t"}[$__rate_interval]))',
         {"sloguard_probe_ttft_seconds_bucket"}),
        ("sloguard_gpu_power_watts * on (uuid) group_left (index, name) sloguard_gpu_info",
         {"sloguard_gpu_power_watts", "sloguard_gpu_info"}),
        ('count by (alertname) (ALERTS{alertstate="firing"} > 0)', {"ALERTS"}),
    ],
)
def test_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_every_panel_names_only_sloguard_metrics() -> None:
    build = load_build()
    for dashboard in build.DASHBOARDS.values():
        for panel in dashboard.panels:
            assert panel.requires in ("", "fault", "gpu", "gpu_fault"), panel.title
            for query in panel.queries:
                names = metric_names(query.expr)
                assert names and all(n.startswith("sloguard_") for n in names), (panel.title, names)


PROBE_FED = re.compile(r"rate\((sloguard_probe_\w+|sloguard_slo_requests_total)\{[^}]*\}\[([^\]]+)\]\)")


def test_probe_rate_windows_hold_several_probe_results() -> None:
    """Probes run every 30 s by default: a rate window of ~1m ($__rate_interval) holds two results, or none."""
    interval = ProbeSpec.model_fields["interval"].default
    seconds = {"s": 1, "m": 60, "h": 3600}
    windows = [m.group(2) for d in load_build().DASHBOARDS.values() for p in d.panels for q in p.queries
               for m in PROBE_FED.finditer(q.expr)]
    assert len(windows) >= 20  # every probe quantile and probe counter panel is covered
    for window in windows:
        assert not window.startswith("$"), f"[{window}]: Grafana's interval variables follow the scrape interval"
        assert int(window[:-1]) * seconds[window[-1]] >= 10 * interval, window
