"""`sloguard bench` command-line options (argparse) and their translation into a RunPlan."""

from __future__ import annotations

import argparse

from sloguard.bench.order import LoadKind
from sloguard.bench.plan import RunPlan, StageSize, parse_levels, parse_warmup
from sloguard.bench.search import SearchSpec
from sloguard.config.units import parse_duration

DEFAULT_DURATION_S = 60.0
MAX_LOAD = {"concurrency": 1024.0, "rate": 10_000.0}

EPILOG = """\
examples:
  sloguard bench -c sloguard.yaml --target chat --concurrency 1,4,16,64 --duration 60s -o results.jsonl
  sloguard bench -c sloguard.yaml --target chat --rate 2,4,8 --arrival poisson --warmup 10s -o results.jsonl
  sloguard bench -c sloguard.yaml --target chat --find-max-load --rate 1 -o results.jsonl
  sloguard bench -c sloguard.yaml --target chat --concurrency 16 --dataset sharegpt.jsonl -o results.jsonl

`sloguard bench --print-schema` prints the JSON Schema of the results file's lines.

exit status: 0 done; 2 bad input or an unusable target (reported before any load is sent);
1 the client failed (a worker process or the results file); 130 interrupted (Ctrl-C ends the running
stage, writes every result so far and the summary).
"""


def parser() -> argparse.ArgumentParser:
    """Return the `sloguard bench` parser (its --help documents every option)."""
    p = argparse.ArgumentParser(
        prog="sloguard bench", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Controlled load against one target of a sloguard config, judged by its SLOs: closed-loop "
                    "concurrency or open-loop rate stages (latencies also from the scheduled send time: no "
                    "coordinated omission), or a search for the highest load at which the SLO holds.")
    p.add_argument("-c", "--config", required=True, help="sloguard config (targets, probes, SLOs)")
    p.add_argument("--target", required=True, help="the target to load (its api_url; metrics_url is scraped)")
    p.add_argument("-o", "--output", required=True, help="results file (JSON Lines, rewritten atomically per stage)")
    load = p.add_argument_group("load (one of --concurrency, --rate; --find-max-load searches)")
    load.add_argument("--concurrency", help="closed loop: comma-separated stream counts, e.g. 1,4,16,64 "
                      "(with --find-max-load: the starting count, default 1)")
    load.add_argument("--rate", help="open loop: comma-separated requests/s, e.g. 2,4,8 (with --find-max-load: "
                      "the starting rate)")
    load.add_argument("--arrival", choices=["poisson", "constant"], default="poisson",
                      help="open-loop arrival process (default poisson)")
    load.add_argument("--find-max-load", action="store_true", help="bracket and bisect the load to the highest "
                      "one at which the SLO holds, with its uncertainty")
    load.add_argument("--max-load", type=float, help="search ceiling (default 1024 streams or 10000 req/s)")
    load.add_argument("--tolerance", type=float, default=0.1, help="search stops when the bracket is this "
                      "narrow, relative (default 0.1)")
    load.add_argument("--max-stages", type=int, default=12, help="search stage budget (default 12)")
    load.add_argument("--confirm", type=int, default=1, help="search: how often a bracket end whose verdict is "
                      "uncertain is measured again, samples pooled (default 1)")
    load.add_argument("--slo", action="append", help="judge only this SLO of the target (repeatable; default: "
                      "every probe SLO of the target)")
    stage = p.add_argument_group("stage size")
    stage.add_argument("--duration", help="per stage, e.g. 60s (default 60s unless --requests)")
    stage.add_argument("--requests", type=int, help="per stage: this many measured requests")
    stage.add_argument("--warmup", default="0s", help="per stage: a duration (10s, added to the stage) or a "
                       "request count (50): sent, excluded from every figure, and counted as such")
    wl = p.add_argument_group("workload (default: the target's first probe in the config)")
    wl.add_argument("--probe", help="take prompt mix, API, max_tokens and timeout from this probe")
    wl.add_argument("--api", choices=["chat", "completions", "tgi", "triton"], help="override the probe's API")
    wl.add_argument("--prompt-tokens", help="prompt mix as TOKENS:WEIGHT pairs, e.g. 64:50,128:35,256:15")
    wl.add_argument("--max-tokens", type=int, help="output tokens per request (dataset rows without their own)")
    wl.add_argument("--ignore-eos", choices=["auto", "on", "off"], default="auto", help="fixed output length: "
                    "auto = where the engine supports ignore_eos (vLLM, SGLang, llama.cpp, TRT-LLM)")
    wl.add_argument("--dataset", help="local JSONL (or JSON array): {\"prompt\", \"max_tokens\"} rows, ShareGPT "
                    "conversations or chat messages; never downloaded")
    wl.add_argument("--dataset-limit", type=int, default=100_000, help="rows read at most (default 100000)")
    wl.add_argument("--seed", type=int, default=0, help="seed of the workload and arrivals (same seed, same sizes "
                    "and arrivals; prompts are salted per run so an engine's prompt cache cannot serve a rerun)")
    wl.add_argument("--same-prompts", action="store_true", help="send exactly the same prompts as another run of "
                    "this seed (no per-run salt): a rerun may then be served from the engine's prompt cache")
    wl.add_argument("--timeout", help="per request, connect to last byte (default: the probe's timeout)")
    wl.add_argument("--behaviours", help="request behaviours as NAME:WEIGHT pairs (default normal:1), e.g. "
                    "normal:90,disconnect@8:5,oversized:3,slow_reader@10:2 (hang up after 8 tokens, a prompt over "
                    "the context length, read 10 tokens/s); only normal requests are judged against the SLOs")
    cl = p.add_argument_group("client and output")
    cl.add_argument("--workers", type=int, help="worker processes (one event loop each; default: by load, at most "
                    "CPUs - 1)")
    cl.add_argument("--stall", default="2s", help="a gap between tokens this long counts as a stall (default 2s)")
    cl.add_argument("--scrape-interval", default="1s", help="how often the target's /metrics is scraped during a "
                    "stage (default 1s)")
    cl.add_argument("--no-nvml", action="store_true", help="do not sample local GPUs through NVML")
    cl.add_argument("--label", action="append", default=[], help="key=value recorded in the header (repeatable), "
                    "e.g. release=v0.11")
    return p


def build_plan(args: argparse.Namespace) -> RunPlan:
    """Return the run plan; ValueError with a one-line message for an impossible combination."""
    if args.concurrency and args.rate:
        raise ValueError("give --concurrency or --rate, not both")
    if not (args.concurrency or args.rate or args.find_max_load):
        raise ValueError("give --concurrency LIST, --rate LIST or --find-max-load")
    if args.duration and args.requests is not None:
        raise ValueError("give --duration or --requests, not both")
    if args.requests is not None and args.requests < 1:
        raise ValueError("--requests must be ≥ 1")
    kind: LoadKind = "rate" if args.rate else "concurrency"
    levels = parse_levels(args.rate or args.concurrency or "1", kind)
    duration = None if args.requests is not None else parse_duration(args.duration or f"{DEFAULT_DURATION_S:g}s")
    warmup_s, warmup_n = parse_warmup(args.warmup)
    size = StageSize(duration, args.requests, warmup_s, warmup_n)
    if not args.find_max_load:
        return RunPlan("sweep", kind, levels, size, args.arrival)
    if len(levels) != 1:
        raise ValueError("--find-max-load takes one starting load, e.g. --rate 1")
    ceiling = args.max_load if args.max_load is not None else MAX_LOAD[kind]
    floor = 1.0 if kind == "concurrency" else levels[0] / 64
    if ceiling < levels[0] or not 0 < args.tolerance < 1 or args.max_stages < 1 or args.confirm < 0:
        raise ValueError("search bounds: need --max-load ≥ start, 0 < --tolerance < 1, --max-stages ≥ 1, --confirm ≥ 0")
    spec = SearchSpec(kind, levels[0], ceiling, floor, args.tolerance, args.max_stages, args.confirm)
    return RunPlan("search", kind, (), size, args.arrival, spec)


def parse_behaviours(text: str) -> tuple[tuple[str, float], ...]:
    """Return `normal:90,disconnect@8:10` as (("normal", 90.0), ("disconnect@8", 10.0)); ValueError names the pair."""
    from sloguard.bench.behaviour import parse

    out = []
    for pair in text.split(","):
        name, _, weight = pair.rpartition(":") if ":" in pair else (pair, "", "1")
        try:
            w = float(weight)
        except ValueError:
            raise ValueError(f"--behaviours: {pair!r} is not NAME:WEIGHT") from None
        if w <= 0:
            raise ValueError(f"--behaviours: {pair!r}: the weight must be > 0")
        parse(name.strip())
        out.append((name.strip(), w))
    if not any(name == "normal" for name, _ in out):
        raise ValueError("--behaviours: needs some normal requests (the ones judged against the SLOs)")
    return tuple(out)


def parse_prompt_mix(text: str) -> tuple[tuple[int, float], ...]:
    """Return `64:50,128:35` as ((64, 50.0), (128, 35.0)); ValueError names the bad pair."""
    out = []
    for pair in text.split(","):
        tokens, _, weight = pair.partition(":")
        try:
            t, w = int(tokens), float(weight or "1")
        except ValueError:
            raise ValueError(f"--prompt-tokens: {pair!r} is not TOKENS:WEIGHT") from None
        if t < 1 or w <= 0:
            raise ValueError(f"--prompt-tokens: {pair!r}: tokens ≥ 1 and weight > 0")
        out.append((t, w))
    return tuple(out)
