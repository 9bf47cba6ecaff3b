"""`sloguard report`: compare a candidate release with a baseline; Markdown, HTML or JSON; exit 0/1/2."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sloguard.reports.data import DataError

EXIT_OK, EXIT_REGRESSION, EXIT_DATA = 0, 1, 2
DESCRIPTION = """Compare a candidate release with a baseline, metric by metric, with 95 % confidence intervals.

Each of --baseline and --candidate is one of:
  FILE [FILE ...]          bench results files (`sloguard bench -o FILE`); several files of one release are
                           pooled: bench the two releases in alternating rounds (A, B, A, B, ...) on a shared
                           host, so a change in its load moves both sides alike
  store:LABEL=VALUE[,...]  probe results in the daemon's store whose release identity has LABEL=VALUE
                           (a `targets[].labels` key, or engine, engine_version, model, target, probe, release_id)
  store:FROM..TO           probe results between two RFC 3339 times (or unix seconds); combine with commas
  prom:URL{SELECTOR}@FROM..TO
                           the exported probe histograms and SLO counters through the Prometheus HTTP API
                           (Prometheus, Thanos, Mimir), at bucket resolution

Exit codes: 0 no regression; 1 a regression (only with --fail-on regression); 2 usage or data errors
(unknown file, incompatible workloads, too few requests).
"""


def parser() -> argparse.ArgumentParser:
    """Return the argument parser."""
    p = argparse.ArgumentParser(prog="sloguard report", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", required=True, nargs="+", action="extend", metavar="SPEC",
                   help="the release to compare against (several bench files: pooled rounds)")
    p.add_argument("--candidate", required=True, nargs="+", action="extend", metavar="SPEC",
                   help="the new release (several bench files: pooled rounds)")
    p.add_argument("-c", "--config", metavar="FILE", help="sloguard config: SLOs to judge against, state_dir for "
                   "store: inputs, secrets to keep out of the report")
    p.add_argument("--state-dir", metavar="DIR", help="read store: inputs from this state_dir (default: the config's)")
    p.add_argument("--daemon", metavar="URL", help="read store: inputs from a running daemon's API instead")
    p.add_argument("--format", default="md", choices=["md", "html", "json"], help="output format (default md)")
    p.add_argument("-o", "--output", metavar="PATH", help="write here instead of stdout")
    p.add_argument("--out-dir", metavar="DIR", help="write report.md, report.html and report.json into DIR")
    p.add_argument("--fail-on", choices=["regression"], help="exit 1 when the verdict is a regression")
    p.add_argument("--threshold", action="append", default=[], metavar="METRIC=VALUE",
                   help="practical threshold per metric (ttft=0.1 or ttft=10%%; error_rate in percentage points: "
                   "error_rate=2%%); repeatable")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0: a report is reproducible)")
    p.add_argument("--replicates", type=int, default=1000, help="bootstrap replicates (default 1000)")
    p.add_argument("--allow-mismatch", action="store_true", help="compare different workloads anyway (warned)")
    p.add_argument("--diagnosis", metavar="FILE", help="JSON list of the daemon's bottleneck verdicts (each SLO's "
                   "`diagnosis` in /api/v1/slos, with `slo`) to show beside the stage analysis; the daemon's "
                   "automatic reports pass their target's")
    return p


def thresholds(items: list[str]) -> dict[str, float]:
    """Return {metric: fraction} from METRIC=VALUE items; ValueError names a bad one."""
    from sloguard.reports.regression import DEFAULT_THRESHOLDS

    out = dict(DEFAULT_THRESHOLDS)
    for item in items:
        metric, _, raw = item.partition("=")
        try:
            value = float(raw.strip().rstrip("%")) / (100.0 if raw.strip().endswith("%") else 1.0)
        except ValueError:
            raise ValueError(f"--threshold {item!r}: expected METRIC=NUMBER, e.g. ttft=0.1 or ttft=10%") from None
        if not metric or value <= 0:
            raise ValueError(f"--threshold {item!r}: expected METRIC=NUMBER with NUMBER > 0")
        out[metric.strip()] = value
    return out


def run(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Build the report document; return it and its verdict. DataError for unusable input."""
    from sloguard.reports.inputs import Context, load_sides
    from sloguard.reports.report import make

    ctx = Context.from_args(args)
    base = load_sides(args.baseline, "baseline", ctx)
    cand = load_sides(args.candidate, "candidate", ctx)
    doc = make(base, cand, ctx.settings(args.seed, args.replicates, thresholds(args.threshold)),
               allow_mismatch=args.allow_mismatch, slos=ctx.slos, verdicts=read_verdicts(args.diagnosis))
    return ctx.scrub(doc), str(doc["verdict"])


def read_verdicts(path: str | None) -> list[dict[str, Any]]:
    """Return the verdicts a --diagnosis file holds; DataError for an unreadable or mis-shaped one."""
    if not path:
        return []
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"--diagnosis {path}: cannot read a JSON list of verdicts ({exc})") from None
    if not isinstance(doc, list) or not all(isinstance(v, dict) for v in doc):
        raise DataError(f"--diagnosis {path}: expected a JSON list of verdict objects")
    return doc


def write(doc: dict[str, Any], fmt: str, output: str | None, out_dir: str | None) -> None:
    """Write the rendered report where asked (stdout by default)."""
    from sloguard.reports.report import render

    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        for ext in ("md", "html", "json"):
            (Path(out_dir) / f"report.{ext}").write_text(render(doc, ext), encoding="utf-8")
    if output:
        Path(output).write_text(render(doc, fmt), encoding="utf-8")
    elif not out_dir:
        sys.stdout.write(render(doc, fmt))


def main(argv: list[str]) -> int:
    """Run `sloguard report`; see DESCRIPTION for the exit codes."""
    args = parser().parse_args(argv)
    try:
        doc, verdict = run(args)
        write(doc, args.format, args.output, args.out_dir)
    except (DataError, ValueError) as exc:
        print(f"sloguard report: {exc}", file=sys.stderr)
        return EXIT_DATA
    except BrokenPipeError:
        raise  # the reader went away (`| head`): the guard around every command ends quietly
    except OSError as exc:
        print(f"sloguard report: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_DATA
    if args.output or args.out_dir:
        print(json.dumps({"verdict": verdict, "output": args.output or args.out_dir}))
    if verdict == "regression" and args.fail_on == "regression":
        return EXIT_REGRESSION
    return EXIT_OK
