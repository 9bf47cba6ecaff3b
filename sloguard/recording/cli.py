"""`sloguard record`: run the daemon and record what it sees; `sloguard replay`: the verdicts a recording gives."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sloguard.escape import terminal


def _record(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="sloguard record", description="Run the daemon with CONFIG and record every "
                                "/metrics page, probe result (before its server record is joined), host read and "
                                "evaluation to a gzip JSON-lines file that `sloguard replay` turns into the same "
                                "verdicts. Stops after --duration or on SIGTERM.")
    p.add_argument("-c", "--config", required=True, metavar="FILE")
    p.add_argument("-o", "--out", required=True, metavar="FILE.jsonl.gz")
    p.add_argument("--duration", type=float, metavar="SECONDS", help="stop after this long")
    p.add_argument("--marks", metavar="FILE", help="JSON lines of fault marks ({t, fault, phase, ...}) written "
                   "by whoever injects faults; copied into the recording when it stops")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE", help="a fact to keep in the header")
    args = p.parse_args(argv)
    from sloguard.config.load import ConfigError, load_config
    from sloguard.recording.recorder import Recorder
    from sloguard.run import serve

    meta = dict(kv.split("=", 1) for kv in args.meta if "=" in kv)
    try:
        load_config(args.config)  # a bad config is one line before anything is written
        recorder = Recorder(args.out, Path(args.config).read_text(encoding="utf-8"), time.time(), meta)
    except (ConfigError, OSError) as exc:
        print("\n".join(terminal(line) for line in str(exc).splitlines()), file=sys.stderr)
        return 2
    try:
        code = asyncio.run(serve(args.config, recorder=recorder, duration=args.duration))
    finally:
        recorder.close(_marks(args.marks))
    print(f"recorded {recorder.pages} pages, {recorder.evaluations} evaluations to {args.out}", file=sys.stderr)
    return code


def _marks(path: str | None) -> list[dict[str, Any]]:
    if not path or not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _replay(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="sloguard replay", description="Replay a recording through the SLO "
                                "evaluation and the diagnosis on its own clock; print every evaluation's verdict.")
    p.add_argument("recording", metavar="FILE.jsonl.gz")
    p.add_argument("--json", action="store_true", help="one JSON object per evaluation")
    args = p.parse_args(argv)
    from sloguard.recording.recorder import read_events
    from sloguard.recording.replay import marks, replay

    try:
        events = read_events(args.recording)
        run = replay(events)
    except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:  # a damaged or foreign file
        print(f"sloguard replay: {terminal(args.recording)}: cannot replay: {terminal(str(exc))}", file=sys.stderr)
        return 2
    start = float(events[0]["t"])
    for m in marks(events):
        print(terminal(f"mark +{float(m['t']) - start:.1f}s {m.get('fault', '?')} {m.get('phase', '')}"))
    for s in run.steps:
        v = s.verdict
        if args.json:
            print(json.dumps({"t": round(s.t - start, 3), "slo": s.slo, "breached": s.breached, "stage": v.stage,
                              "cause": v.cause, "lever": v.lever, "missing": list(v.missing)}))
        else:
            print(terminal(f"+{s.t - start:7.1f}s {s.slo} {'BREACH' if s.breached else 'ok    '} "
                           f"{v.stage}/{v.cause} {v.lever}"))
    return 0


def main(argv: Sequence[str]) -> int:
    """`sloguard record`."""
    return _record(argv)


def replay_main(argv: Sequence[str]) -> int:
    """`sloguard replay`."""
    return _replay(argv)
