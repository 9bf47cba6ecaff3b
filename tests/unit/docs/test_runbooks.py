"""Every alert sloguard ships has a runbook page, and every such alert's runbook_url points at it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from sloguard.alerts.rules import BUILTIN_ALERTS, BURN_ALERT, rules_from_config
from sloguard.config.load import load_config
from sloguard.config.runbooks import DEFAULT_TEMPLATE, runbook_url
from sloguard.gpu.alerts import GPU_ALERTS
from sloguard.guardrails.alerts import CHECK_ALERTS, GUARDRAIL_ALERTS, STAGE_ALERT
from sloguard.reports.message import ALERTNAME as REPORT_ALERT
from sloguard.rulegen.prometheus import generate

ROOT = Path(__file__).resolve().parents[3]
RUNBOOKS = ROOT / "docs" / "runbooks"
META = ROOT / "alerts" / "sloguard-meta.yaml"
SECTIONS = ("## What it means", "## How bad is it", "## First checks", "## Levers", "## Escalate when")


def meta_alerts() -> dict[str, dict[str, object]]:
    rules = [r for g in yaml.safe_load(META.read_text())["groups"] for r in g["rules"] if "alert" in r]
    return {r["alert"]: r for r in rules}


def every_alert() -> set[str]:
    """Return the name of every alert sloguard can send, from the tables that define them."""
    guards = {k.alert for k in GUARDRAIL_ALERTS.values()} | {k.alert for k in CHECK_ALERTS.values()}
    return ({n for n, *_ in BUILTIN_ALERTS} | {a.name for a in GPU_ALERTS} | guards
            | {STAGE_ALERT, BURN_ALERT, REPORT_ALERT} | set(meta_alerts()))


@pytest.mark.parametrize("name", sorted(every_alert()))
def test_every_alert_has_a_runbook_page(name: str) -> None:
    page = RUNBOOKS / f"{name}.md"
    assert page.is_file(), f"write docs/runbooks/{name}.md (what it means, how bad, first checks, levers, escalate)"
    text = page.read_text()
    assert text.startswith(f"# {name}\n")
    for section in SECTIONS:
        assert section in text, f"{name}: no '{section}'"
    checks = text.split("## First checks", 1)[1].split("## Levers", 1)[0]
    assert len(re.findall(r"^\d\. ", checks, re.M)) >= 3 and checks.count("```") >= 6, f"{name}: three checks"
    assert f"]({name}.md)" in (RUNBOOKS / "index.md").read_text(), f"{name}: not listed in docs/runbooks/index.md"


def test_no_runbook_page_without_an_alert() -> None:
    pages = {p.stem for p in RUNBOOKS.glob("*.md")} - {"index"}
    assert pages == every_alert()


def test_fixed_expressions_name_their_metric_in_the_runbook() -> None:
    for name, expr in [(n, e) for n, e, *_ in BUILTIN_ALERTS] + [(a.name, a.expr) for a in GPU_ALERTS]:
        metric = re.match(r"[a-z_]+", expr)
        assert metric and metric.group(0) in (RUNBOOKS / f"{name}.md").read_text(), name


def _everything_config(tmp_path: Path, template: str | None) -> Path:
    """The example config with every guardrail enabled and both check probes (every generated kind of alert)."""
    doc = yaml.safe_load((ROOT / "sloguard.example.yaml").read_text())
    for t in doc["targets"]:
        t["guardrails"] = {k: {} for k in GUARDRAIL_ALERTS}
    doc["probes"] += [{"name": "x-abort", "target": doc["targets"][0]["name"], "kind": "abort"},
                      {"name": "x-oversized", "target": doc["targets"][0]["name"], "kind": "oversized_prompt"}]
    if template is None:
        doc.pop("runbook_url_template", None)
    else:
        doc["runbook_url_template"] = template
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("template", [None, "https://docs.example.com/sloguard/runbooks/{alertname}/"])
def test_every_built_in_and_generated_alert_links_its_runbook(tmp_path: Path, template: str | None) -> None:
    cfg = load_config(_everything_config(tmp_path, template))
    want = template or DEFAULT_TEMPLATE
    rules = [r for r in rules_from_config(cfg) if r.name != "HighTTFT"]  # the example's own threshold alert
    assert {r.name for r in rules} == every_alert() - {REPORT_ALERT} - set(meta_alerts())
    for r in rules:
        assert dict(r.annotations)["runbook_url"] == runbook_url(want, r.name), r.key
    for text in generate(cfg, "all.yaml").values():
        for group in yaml.safe_load(text)["groups"]:
            for rule in (r for r in group["rules"] if r.get("alert", "HighTTFT") != "HighTTFT"):
                assert rule["annotations"]["runbook_url"] == runbook_url(want, rule["alert"]), rule["alert"]


def test_an_slo_runbook_url_wins_and_an_empty_template_leaves_it_out(tmp_path: Path) -> None:
    cfg = load_config(_everything_config(tmp_path, ""))
    for r in rules_from_config(cfg):
        assert "runbook_url" not in dict(r.annotations) or r.name == "HighTTFT", r.key
    doc = yaml.safe_load(_everything_config(tmp_path, None).read_text())
    doc["slos"][0]["runbook_url"] = "https://wiki.example.com/chat"
    (tmp_path / "own.yaml").write_text(yaml.safe_dump(doc))
    burns = [r for r in rules_from_config(load_config(tmp_path / "own.yaml")) if r.name == BURN_ALERT]
    urls = {dict(r.labels)["slo"]: dict(r.annotations)["runbook_url"] for r in burns}
    assert urls[doc["slos"][0]["name"]] == "https://wiki.example.com/chat"
    assert set(urls.values()) - {"https://wiki.example.com/chat"} == {runbook_url(DEFAULT_TEMPLATE, BURN_ALERT)}


def test_the_meta_rules_link_the_default_runbooks() -> None:
    for name, rule in meta_alerts().items():
        assert rule["annotations"]["runbook_url"] == runbook_url(DEFAULT_TEMPLATE, name)  # type: ignore[index]
