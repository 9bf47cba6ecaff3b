"""The metrics reference page (docs/metrics-reference.md), generated from the exporter's family declarations.

Every family `sloguard.catalog.families()` returns (what a fresh `sloguard check` accepts in alert
expressions, and what the exporter builds its families from), grouped by subject, with its samples, labels and
help text; a test fails when the committed page differs.
"""

from __future__ import annotations

from sloguard.catalog import families
from sloguard.families import FamilyDef

# Section title -> the name prefixes (after `sloguard_`) it holds, in page order; the rest go under "Other".
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("SLOs and budgets", ("slo_",)),
    ("Stages and stage budgets", ("stage_", "request_stage", "request_records")),
    ("Diagnosis", ("bottleneck_",)),
    ("Probes", ("probe_",)),
    ("Guardrails and checks", ("guardrail_", "check_")),
    ("Engines (normalised server series)", ("server_",)),
    ("Fleet and discovery", ("sd_", "service_", "ha_")),
    ("Traces", ("trace_",)),
    ("GPU", ("gpu_",)),
    ("GPU canary", ("canary_",)),
    ("Serving processes", ("process_",)),
    ("Releases and reports", ("release_", "report_")),
    ("Alerts and notifications", ("alerts", "notifications", "outbox_")),
    ("Sources and scrapes", ("source_", "scrape_", "invalid_input")),
    ("The daemon itself", ("config_", "build", "evaluation_", "exposition_", "start_", "store_")),
)
INTRO = """# Metrics reference

Every series family sloguard exports, generated from the exporter's own declarations
(`sloguard.catalog.families()`, the names and labels `sloguard check` accepts in alert expressions) by
`sloguard/exporter/reference.py`; a test fails when this page and the declarations differ
(`SLOGUARD_UPDATE_GOLDEN=1` rewrites it).

All names carry the `sloguard_` prefix and base units; `promtool check metrics` passes on the exposition (a test
enforces it). Windowed values are recomputed every `evaluation_interval`; a window without data exports nothing (no
data is never 0). Families with a `quantile` label are typed `summary` (promtool rejects a `quantile` label
elsewhere); they carry no `_sum`/`_count`. A counter's samples end in `_total`, a histogram's in `_bucket` (with
`le`), `_sum` and `_count`, an info family's in `_info`. A label written `label_*` stands for every label with that
prefix (`label_release` from `targets[].labels.release`). Which engine gives which `sloguard_server_*` signal:
[Engines](engines.md); what the SLO numbers mean: [Exact definitions](definitions.md).
"""


def group(name: str) -> str:
    """Return the section title of a family name (`sloguard_slo_burn_rate` -> "SLOs and budgets")."""
    short = name.removeprefix("sloguard_")
    return next((title for title, prefixes in GROUPS if short.startswith(prefixes)), "Other")


def _samples(fd: FamilyDef) -> str:
    return "<br>".join(f"`{s}`" for s in fd.samples())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;")


def markdown() -> str:
    """Return the whole reference page: one table per group, families sorted by name."""
    fams = families()
    order = [title for title, _ in GROUPS] + ["Other"]
    lines = [INTRO]
    for title in order:
        members = sorted(n for n in fams if group(n) == title)
        if not members:
            continue
        lines += [f"## {title}", "", "| family | type | labels | what |", "| --- | --- | --- | --- |"]
        for name in members:
            fd = fams[name]
            labels = ", ".join(f"`{n}`" for n in fd.labels) or "—"
            lines.append(f"| {_samples(fd)} | {fd.kind} | {labels} | {_cell(fd.help)} |")
        lines.append("")
    return "\n".join(lines)
