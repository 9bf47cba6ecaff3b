"""`sloguard bench`: load one target of a config, judge each stage by its SLOs, write RESULTS.jsonl."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import secrets
import signal
import sys
from dataclasses import dataclass

from sloguard.bench import options, table
from sloguard.bench.dataset import DatasetError, load_dataset
from sloguard.bench.header import header, load_json, sha256_file, workload_json
from sloguard.bench.judge import Criterion, criteria_for
from sloguard.bench.plan import RunPlan, parse_labels
from sloguard.bench.pool import WorkerPool
from sloguard.bench.preflight import PreflightError, preflight
from sloguard.bench.progress import Progress
from sloguard.bench.results import ResultsFile
from sloguard.bench.runner import Runner, Setup
from sloguard.bench.schema import schema
from sloguard.bench.serverview import cache_warnings
from sloguard.bench.watch import ServerWatch
from sloguard.bench.workload import WorkloadSpec, with_max_tokens
from sloguard.config.load import ConfigError, load_config
from sloguard.config.secrets import SecretError, read_secret
from sloguard.config.spec import Config, TargetSpec
from sloguard.config.units import parse_duration
from sloguard.probes.job import ProbeJob, jobs_from_config
from sloguard.slo.model import SLO, slos_from_config
from sloguard.urls import api_root


class UsageError(Exception):
    """Bad input: one line naming what is wrong (exit 2)."""


@dataclass
class Prepared:
    """A run, checked and built, before any request is sent."""

    args: argparse.Namespace
    target: TargetSpec
    api_key: str | None
    slos: tuple[SLO, ...]
    criteria: list[Criterion]
    workload: WorkloadSpec
    source: str
    dataset_sha256: str | None
    plan: RunPlan
    labels: dict[str, str]


def main(argv: list[str]) -> int:
    """Run `sloguard bench`; return the exit code (see --help)."""
    if argv == ["--print-schema"]:
        print(json.dumps(schema(), indent=2))
        return 0
    args = options.parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="sloguard bench: %(message)s", stream=sys.stderr)
    try:
        prepared = prepare(args)
    except UsageError as exc:
        print(f"sloguard bench: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(execute(prepared, argv))
    except KeyboardInterrupt:  # before the stages' own handler is installed, or a second Ctrl-C
        print("sloguard bench: interrupted", file=sys.stderr)
        return 130


def prepare(args: argparse.Namespace) -> Prepared:
    """Check every input and build the run; UsageError names the first problem."""
    try:
        plan = options.build_plan(args)
        labels = parse_labels(args.label)
        cfg = load_config(args.config)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except ConfigError as exc:
        raise UsageError(exc.report(args.config)) from None
    target = next((t for t in cfg.targets if t.name == args.target), None)
    if target is None:
        raise UsageError(f"--target: no target {args.target!r} in {args.config} "
                         f"(targets: {', '.join(t.name for t in cfg.targets) or 'none'})")
    if not target.api_url:
        raise UsageError(f"target {target.name!r} has no api_url to send requests to")
    try:
        api_key = read_secret(target.api_key_file, target.api_key_env)
    except SecretError as exc:
        raise UsageError(f"target {target.name!r}: {exc}") from None
    slos = _slos(cfg, target.name, args.slo)
    criteria = criteria_for(slos)
    if plan.mode == "search" and not criteria:
        raise UsageError(f"--find-max-load needs a probe SLO (goodput, objectives or error_rate) of target "
                         f"{target.name!r} in {args.config}")
    job, source = _job(cfg, target, api_key, args)
    rows: tuple[tuple[str, int], ...] = ()
    digest = None
    if args.dataset:
        try:
            data = load_dataset(args.dataset, args.dataset_limit)
        except DatasetError as exc:
            raise UsageError(str(exc)) from None
        rows, digest, source = data.rows, sha256_file(args.dataset), f"dataset:{os.path.basename(args.dataset)}"
    try:
        behaviours = options.parse_behaviours(args.behaviours) if args.behaviours else (("normal", 1.0),)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    salt = "" if args.same_prompts else f"{secrets.randbits(32):08x}"
    workload = WorkloadSpec(job, args.seed, rows, behaviours, salt=salt)
    return Prepared(args, target, api_key, slos, criteria, workload, source, digest, plan, labels)


def _slos(cfg: Config, target: str, only: list[str] | None) -> tuple[SLO, ...]:
    slos = tuple(s for s in slos_from_config(cfg) if s.target == target)
    if only:
        unknown = sorted(set(only) - {s.name for s in slos})
        if unknown:
            raise UsageError(f"--slo: no SLO {', '.join(unknown)} for target {target!r}")
        slos = tuple(s for s in slos if s.name in only)
    return slos


def _job(cfg: Config, target: TargetSpec, api_key: str | None, args: argparse.Namespace) -> tuple[ProbeJob, str]:
    """Return the request template: the chosen (or first) probe of the target, with command-line overrides."""
    probes = [p for p in cfg.probes if p.target == target.name and (not args.probe or p.name == args.probe)]
    if args.probe and not probes:
        raise UsageError(f"--probe: no probe {args.probe!r} of target {target.name!r}")
    if probes:
        jobs = jobs_from_config(cfg.model_copy(update={"probes": probes[:1]}), {target.name: api_key or ""})
        job, source = dataclasses.replace(jobs[0], api_key=api_key), f"probe:{probes[0].name}"
    else:
        buckets = tuple(sorted(cfg.probe_settings.prompt_buckets.items(), key=lambda kv: kv[1]))
        job = ProbeJob(name="bench", target=target.name, api="chat", url=api_root(target.api_url or ""),
                       model=target.model or "", prompt_buckets=buckets, api_key=api_key)
        source = "default"
    try:
        updates: dict[str, object] = {"name": "bench", "interval": 0.0}
        if args.api:
            updates["api"] = args.api
        if args.max_tokens is not None:
            if args.max_tokens < 1:
                raise ValueError("--max-tokens must be ≥ 1")
            job = with_max_tokens(job, args.max_tokens)
        if args.prompt_tokens:
            updates["prompts"] = options.parse_prompt_mix(args.prompt_tokens)
        if args.timeout:
            updates["timeout"] = parse_duration(args.timeout)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return dataclasses.replace(job, **updates), source  # type: ignore[arg-type]


async def execute(p: Prepared, argv: list[str]) -> int:
    """Preflight, then run every stage; print the summary table and the verdict."""
    progress = Progress()
    try:
        info, workload = await preflight(p.target, p.workload, p.api_key, p.args.ignore_eos)
    except PreflightError as exc:
        print(f"sloguard bench: target {p.target.name!r}: {exc}; nothing was sent beyond one request",
              file=sys.stderr)
        return 2
    try:
        stall_s, scrape_s = parse_duration(p.args.stall), parse_duration(p.args.scrape_interval)
    except ValueError as exc:
        print(f"sloguard bench: {exc}", file=sys.stderr)
        return 2
    wl = workload_json(workload, p.source, p.dataset_sha256)
    results = ResultsFile(p.args.output)
    try:
        results.start(header(argv=argv, config_path=p.args.config, target=p.target, info=info, workload=wl,
                             load=load_json(p.plan), criteria=p.criteria, labels=p.labels,
                             client={"workers": p.args.workers or "auto", "timeout_s": workload.job.timeout,
                                     "connection_settle_s": workload.settle_s}))
    except OSError as exc:
        print(f"sloguard bench: cannot write {p.args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    progress.note(f"target {p.target.name}: {info.engine} {info.engine_version or ''} model {info.model!r}; "
                  f"writing {p.args.output}")
    watch = ServerWatch(p.target, p.api_key, scrape_s, nvml=not p.args.no_nvml)
    setup = Setup(workload, p.plan, p.slos, p.criteria, results, watch, progress, p.args.workers, stall_s,
                  os.cpu_count() or 1)
    return await _run(Runner(setup, WorkerPool(workload)), results)


async def _run(runner: Runner, results: ResultsFile) -> int:
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, _on_sigint, runner, loop)
    code = 0
    try:
        await runner.run()
    except (OSError, RuntimeError) as exc:
        print(f"sloguard bench: {exc}", file=sys.stderr)
        code = 1
    except Exception as exc:  # a bug: one line for the user, the traceback for whoever debugs it
        logging.getLogger("sloguard.bench").debug("run failed", exc_info=True)
        print(f"sloguard bench: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        runner.pool.close()
        await runner.s.watch.close()
    code = 130 if runner.interrupted else code
    tail = [runner.search_row] if runner.search_row is not None else []
    status = "interrupted" if runner.interrupted else "complete"
    results.append([*tail, {"type": "end", "status": status, "stages": len(runner.stages), "exit_code": code}])
    print(table.table(runner.stages))
    for line in cache_warnings(runner.stages):
        print(line, file=sys.stderr)
    if runner.search_row is not None:
        print(table.verdict(runner.search_row))
    return code


def _on_sigint(runner: Runner, loop: asyncio.AbstractEventLoop) -> None:
    if runner.interrupted:  # a second Ctrl-C: give up on a clean end
        loop.remove_signal_handler(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
        return
    runner.interrupt()

