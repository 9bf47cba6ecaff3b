"""`sloguard probe -c FILE [--probe NAME] [--once] [--json]`: run the configured probes and print each request.

With --once every probe runs one request; without it, rounds repeat every probe's interval (the shortest of
the selected probes) until Ctrl-C, like a foreground daemon without SLOs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Sequence

from sloguard.config.load import ConfigError, load_config
from sloguard.config.secrets import SecretError, read_secret
from sloguard.config.spec import Config
from sloguard.escape import terminal
from sloguard.model import ProbeResult
from sloguard.probes.history import to_row
from sloguard.probes.job import ProbeJob, jobs_from_config
from sloguard.probes.worker import run_once
from sloguard.traces.record import finalise

# column header -> (ProbeResult field, scale, format); times shown in milliseconds
COLUMNS: tuple[tuple[str, str, float, str], ...] = (
    ("PROBE", "probe", 1, "s"), ("TARGET", "target", 1, "s"), ("OK", "ok", 1, "s"),
    ("HTTP", "status_code", 1, "s"), ("CONNECT_MS", "connect_s", 1e3, ".1f"), ("TTFT_MS", "ttft_s", 1e3, ".1f"),
    ("TTFOT_MS", "ttfot_s", 1e3, ".1f"), ("TPOT_MS", "tpot_s", 1e3, ".2f"), ("E2E_MS", "e2e_s", 1e3, ".1f"),
    ("ITL_P50_MS", "itl_p50_s", 1e3, ".2f"), ("ITL_P99_MS", "itl_p99_s", 1e3, ".2f"),
    ("PROMPT_TOK", "prompt_tokens", 1, "s"), ("OUT_TOK", "output_tokens", 1, "s"),
    ("BUCKET", "prompt_bucket", 1, "s"), ("CHECK", "check_outcome", 1, "s"), ("CHECK_MS", "check_s", 1e3, ".1f"),
    ("ERROR", "error", 1, "s"),
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sloguard probe", description=__doc__)
    p.add_argument("-c", "--config", required=True, help="sloguard config file")
    p.add_argument("--probe", action="append", help="only this probe (repeatable)")
    p.add_argument("--once", action="store_true", help="run each probe once and exit (default: repeat until Ctrl-C)")
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
    return format(value * scale, fmt) if fmt != "s" else terminal(str(value))  # errors quote the server


def table(results: Sequence[ProbeResult]) -> str:
    """Render results as an aligned text table, one row per request."""
    rows = [[h for h, *_ in COLUMNS]] + [[_cell(r, a, s, f) for _, a, s, f in COLUMNS] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def main(argv: list[str]) -> int:
    """Run the probes; exit 0 if all succeeded, 1 if any failed, 2 on usage or configuration errors."""
    args = _parser().parse_args(argv)
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
    if args.once:
        results = asyncio.run(run_once(jobs))
        _print(results, args.json)
        return 0 if all(r.ok for r in results) else 1
    return _repeat(jobs, args.json)


def _print(results: Sequence[ProbeResult], as_json: bool) -> None:
    # In-band records get their stages here as in the daemon, so both print the same request the same way.
    results = [finalise(r)[0] if r.record else r for r in results]
    if as_json:
        for r in results:
            print(json.dumps(to_row(r), sort_keys=True), flush=True)
    else:
        print(table(results), flush=True)


def _repeat(jobs: Sequence[ProbeJob], as_json: bool) -> int:
    """Run rounds until Ctrl-C or SIGTERM; return 0 if every request succeeded, else 1."""
    interval = min(j.interval for j in jobs)
    failed = False
    if not as_json:
        print(f"probing {len(jobs)} probe(s) every {interval:g}s until Ctrl-C", file=sys.stderr, flush=True)

    async def rounds() -> None:
        nonlocal failed
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        while not stop.is_set():
            start = loop.time()
            results = await run_once(jobs)
            failed = failed or not all(r.ok for r in results)
            if not as_json:
                print(time.strftime("%H:%M:%S"))
            _print(results, as_json)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, interval - (loop.time() - start))):
                    await stop.wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(rounds())
    return 1 if failed else 0
