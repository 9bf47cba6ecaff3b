"""Cross-field checks that pydantic's per-field validation cannot express; each returns `PATH: message`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sloguard.catalog import series as exported
from sloguard.config.expr import parse_expr
from sloguard.config.fleetchecks import check_fleet
from sloguard.config.guardchecks import check_guard_probes
from sloguard.config.labels import known_values, unknown_names, unknown_values
from sloguard.config.spec import Config, ServiceSpec
from sloguard.config.units import format_duration

Check = Callable[[Config], Iterable[str]]
MAX_OBJECTIVES = 14  # one flag bit each in the probe windows (sloguard.windows.probe)


@dataclass(frozen=True)
class Invalid:
    """Stand-in for a list item that failed validation; its name keeps references to it from being reported."""

    name: str


def valid(items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
    """Yield (index, item) for the items that passed validation, keeping their original indices."""
    for i, item in enumerate(items):
        if not isinstance(item, Invalid):
            yield i, item


def _duplicates(items: Iterable[Any], path: str) -> Iterable[str]:
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if item.name in seen:
            yield f"{path}[{i}].name: duplicate name {item.name!r} (first used at {path}[{seen[item.name]}])"
        else:
            seen[item.name] = i


def check_unique_names(cfg: Config) -> Iterable[str]:
    """Names are identifiers in labels and rule names, so they must be unique per list."""
    for path in ("targets", "probes", "slos", "alerts", "notifiers"):
        # services follow the declared targets in cfg.targets; check_fleet checks their names
        yield from _duplicates([x for x in getattr(cfg, path) if not isinstance(x, ServiceSpec)], path)
    yield from _duplicates(cfg.host.processes, "host.processes")


def check_references(cfg: Config) -> Iterable[str]:
    """Every probe, SLO and process must name a target (and probe) that exists."""
    targets = {t.name: t for t in cfg.targets}
    probes = {p.name: p for p in cfg.probes}
    for i, p in valid(cfg.probes):
        t = targets.get(p.target)
        if t is None:
            yield f"probes[{i}].target: unknown target {p.target!r}"
        elif not isinstance(t, Invalid) and t.api_url is None:
            yield f"probes[{i}].target: target {p.target!r} has no api_url to probe"
    for i, s in valid(cfg.slos):
        if s.target not in targets:
            yield f"slos[{i}].target: unknown target {s.target!r}"
        if s.probe is not None and s.probe not in probes:
            yield f"slos[{i}].probe: unknown probe {s.probe!r}"
        elif s.probe is not None and not isinstance(probes[s.probe], Invalid) and probes[s.probe].target != s.target:
            yield f"slos[{i}].probe: probe {s.probe!r} targets {probes[s.probe].target!r}, not {s.target!r}"
    for i, proc in valid(cfg.host.processes):
        if proc.target is not None and proc.target not in targets:
            yield f"host.processes[{i}].target: unknown target {proc.target!r}"


def check_timeouts(cfg: Config) -> Iterable[str]:
    """A timeout at or above its interval would let runs of the same job overlap."""
    for i, p in valid(cfg.probes):
        if p.timeout >= p.interval:
            yield f"probes[{i}].timeout: must be < interval ({p.timeout:g}s >= {p.interval:g}s)"
    for i, t in valid(_declared(cfg)):
        if t.scrape_timeout >= t.scrape_interval:
            yield (f"targets[{i}].scrape_timeout: must be < scrape_interval "
                   f"({t.scrape_timeout:g}s >= {t.scrape_interval:g}s)")
        if t.metrics_url is None and t.api_url is None:
            yield f"targets[{i}]: needs metrics_url, api_url or both"
        if t.api_key_file is not None and t.api_key_env is not None:
            yield f"targets[{i}].api_key_file: set api_key_file or api_key_env, not both"


def check_slos(cfg: Config) -> Iterable[str]:
    """An SLO must measure something, and server SLOs can only use what engines export."""
    for i, s in valid(cfg.slos):
        if not s.objectives and s.goodput is None and s.error_rate is None:
            yield f"slos[{i}]: needs at least one of objectives, goodput, error_rate"
        if s.goodput is not None and not any((s.goodput.ttft, s.goodput.tpot, s.goodput.e2e, s.goodput.itl)):
            yield f"slos[{i}].goodput: needs at least one latency threshold (ttft, tpot, e2e, itl)"
        if s.source == "server":
            if s.probe is not None:
                yield f"slos[{i}].probe: only allowed with source: probe"
            if s.goodput is not None:
                yield f"slos[{i}].goodput: needs per-request data, only available with source: probe"
            if s.error_rate is not None:  # engine histograms count observations, not failures
                yield f"slos[{i}].error_rate: needs per-request outcomes, only available with source: probe"
            for j, o in enumerate(s.objectives):
                if o.metric == "ttfot":
                    yield f"slos[{i}].objectives[{j}].metric: ttfot is only measured by probes"
        elif s.source == "probe":
            for j, o in enumerate(s.objectives):
                if o.metric in ("queue", "prefill"):
                    yield f"slos[{i}].objectives[{j}].metric: {o.metric} is only known server-side (source: server)"


def check_percentiles(cfg: Config) -> Iterable[str]:
    """A percentile is 0..100 exclusive; 0 < p <= 1 is a quantile written where a percentile belongs."""
    for i, s in valid(cfg.slos):
        for j, o in enumerate(s.objectives):
            if o.percentile <= 1:
                hint = f"did you mean {o.percentile * 100:g}?" if o.percentile < 1 else "did you mean 99?"
                yield (f"slos[{i}].objectives[{j}].percentile: {o.percentile:g} is a percentile in (0, 100), "
                       f"not a quantile: {hint}")
        if s.source == "probe" and len(s.objectives) > MAX_OBJECTIVES:
            yield f"slos[{i}].objectives: at most {MAX_OBJECTIVES} objectives per probe SLO"


def check_retention(cfg: Config) -> Iterable[str]:
    """Stored probe results rebuild probe SLO windows on start, so they must cover the longest window."""
    longest = max((s.error_budget_window for _, s in valid(cfg.slos) if s.source == "probe"), default=0.0)
    if cfg.probe_settings.retention < longest:
        yield (f"probe_settings.retention: must be >= the longest error_budget_window ({format_duration(longest)}) "
               "so a restart keeps the error budget")


def check_notifiers(cfg: Config) -> Iterable[str]:
    """Each notifier needs exactly one way to reach its receiver."""
    for i, n in valid(cfg.notifiers):
        if n.type == "slack":
            ways = [n.token_file or n.token_env, n.webhook_url_file or n.webhook_url_env]
            if sum(1 for w in ways if w) != 1:
                yield (f"notifiers[{i}]: slack needs exactly one of token_file/token_env "
                       "or webhook_url_file/webhook_url_env")
            if (n.token_file or n.token_env) and not n.channel:
                yield f"notifiers[{i}].channel: required with a bot token"
        elif n.type == "webhook" and not (n.url or n.url_with_secret_file or n.url_with_secret_env):
            yield f"notifiers[{i}].url: required (or url_with_secret_file / url_with_secret_env)"


def check_processes(cfg: Config) -> Iterable[str]:
    """A serving process needs exactly one matcher, and regexes must compile."""
    for i, p in valid(cfg.host.processes):
        ways = [p.process_name, p.cmdline_regex, p.pid_file]
        if sum(1 for w in ways if w) != 1:
            yield f"host.processes[{i}]: set exactly one of process_name, cmdline_regex, pid_file"
        if p.cmdline_regex:
            try:
                re.compile(p.cmdline_regex)
            except re.error as exc:
                yield f"host.processes[{i}].cmdline_regex: invalid regex: {exc}"


def check_alert_exprs(cfg: Config) -> Iterable[str]:
    """Alert expressions must be in the supported PromQL subset, so they also work verbatim in Prometheus,
    and may only select names, label names and label values sloguard exports (a typo would make an alert that
    can never fire)."""
    known: dict[str, set[str]] | None = None
    series: dict[str, tuple[str, ...]] | None = None
    for i, a in valid(cfg.alerts):
        try:
            expr = parse_expr(a.expr)
        except ValueError as exc:
            yield f"alerts[{i}].expr: {exc}"
            continue
        if series is None:
            series = exported()
        names = list(unknown_names(expr.metric, expr.matchers, series))
        known = known or known_values(cfg)
        found = names or unknown_values(expr.metric, expr.matchers, known)
        yield from (f"alerts[{i}].expr: {line}" for line in found)


def check_server_records(cfg: Config) -> Iterable[str]:
    """Engine spans need somewhere to arrive: `server_records: otlp` needs the OTLP receiver."""
    if cfg.traces.receiver is not None:
        return
    for i, t in valid(cfg.targets):
        if t.server_records == "otlp":
            path = f"services[{i - len(_declared(cfg))}]" if isinstance(t, ServiceSpec) else f"targets[{i}]"
            yield f"{path}.server_records: 'otlp' needs traces.receiver.listen (where the engine sends spans)"


def _declared(cfg: Config) -> list[Any]:
    """Return the `targets:` entries as written (cfg.targets also holds the services, after them)."""
    return [t for t in cfg.targets if not isinstance(t, ServiceSpec)]



CHECKS: tuple[Check, ...] = (
    check_unique_names, check_references, check_timeouts, check_slos, check_percentiles, check_retention,
    check_notifiers, check_processes, check_alert_exprs, check_server_records,
)
# Guardrail probes (sloguard.config.guardchecks) and the fleet keys (fleetchecks), kept apart from the table above.
CHECKS = (*CHECKS, check_guard_probes, check_fleet)


def cross_check(cfg: Config) -> list[str]:
    """Run every check and return all problems found, in table order."""
    return [line for check in CHECKS for line in check(cfg)]
