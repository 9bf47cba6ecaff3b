"""`sloguard probe -c FILE [--probe NAME] --once [--json]`: run each configured probe once and print it."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from sloguard.config.load import ConfigError, load_config
from sloguard.config.secrets import SecretError, read_secret
from sloguard.config.spec import Config
from sloguard.model import ProbeResult
from sloguard.probes.history import to_row
from sloguard.probes.job import ProbeJob, jobs_from_config
from sloguard.probes.worker import run_once

# column header -> (ProbeResult field, scale, format); times shown in milliseconds
COLUMNS: tuple[tuple[str, str, float, str], ...] = (
    ("PROBE", "probe", 1, "s"), ("TARGET", "target", 1, "s"), ("OK", "ok", 1, "s"),
    ("HTTP", "status_code", 1, "s"), ("CONNECT_MS", "connect_s", 1e3, ".1f"), ("TTFT_MS", "ttft_s", 1e3, ".1f"),
    ("TTFOT_MS", "ttfot_s", 1e3, ".1f"), ("TPOT_MS", "tpot_s", 1e3, ".2f"), ("E2E_MS", "e2e_s", 1e3, ".1f"),
    ("ITL_P50_MS", "itl_p50_s", 1e3, ".2f"), ("ITL_P99_MS", "itl_p99_s", 1e3, ".2f"),
    ("PROMPT_TOK", "prompt_tokens", 1, "s"), ("OUT_TOK", "output_tokens", 1, "s"),
    ("BUCKET", "prompt_bucket", 1, "s"), ("ERROR", "error", 1, "s"),
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sloguard probe", description=__doc__)
    p.add_argument("-c", "--config", required=True, help="sloguard config file")
    p.add_argument("--probe", action="append", help="only this probe (repeatable)")
    p.add_argument("--once", action="store_true", help="run each probe once (the only mode)")
    p.add_argument("--json", action="store_true", help="print one JSON object per request")
    return p


def _jobs(cfg: Config, only: Sequence[str] | None) -> list[ProbeJob]:
    names = {p.target for p in cfg.probes if not only or p.name in only}
    secrets: dict[str, str] = {}
    for t in cfg.targets:
        if t.name in names and (key := read_secret(t.api_key_file, t.api_key_env)) is not None:
            secrets[t.name] = key
    jobs = jobs_from_config(cfg, secrets)
    return [j for j in jobs if not only or j.name in only]


def _cell(r: ProbeResult, attr: str, scale: float, fmt: str) -> str:
    value = getattr(r, attr)
    if value is None:
        return "-"
    return format(value * scale, fmt) if fmt != "s" else str(value)


def table(results: Sequence[ProbeResult]) -> str:
    """Render results as an aligned text table, one row per request."""
    rows = [[h for h, *_ in COLUMNS]] + [[_cell(r, a, s, f) for _, a, s, f in COLUMNS] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def main(argv: list[str]) -> int:
    """Run the probes; exit 0 if all succeeded, 1 if any failed, 2 on usage or configuration errors."""
    args = _parser().parse_args(argv)
    if not args.once:
        print("sloguard probe: only --once is supported (the daemon runs probes continuously)", file=sys.stderr)
        return 2
    try:
        jobs = _jobs(load_config(args.config), args.probe)
    except ConfigError as exc:
        print("\n".join([f"{args.config}: invalid configuration", *exc.errors]), file=sys.stderr)
        return 2
    except (SecretError, ValueError) as exc:
        print(f"{args.config}: {exc}", file=sys.stderr)
        return 2
    if not jobs:
        print("no matching probes configured", file=sys.stderr)
        return 2
    results = asyncio.run(run_once(jobs))
    if args.json:
        for r in results:
            print(json.dumps(to_row(r), sort_keys=True))
    else:
        print(table(results))
    return 0 if all(r.ok for r in results) else 1
