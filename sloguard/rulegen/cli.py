"""`sloguard rules -c FILE -o DIR`: write Prometheus rule files generated from a config, and an Alertmanager example."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sloguard.alerts.rules import ExprError
from sloguard.config.load import ConfigError, load_config
from sloguard.rulegen import alertmanager
from sloguard.rulegen.alertmanager import AM_EXAMPLE
from sloguard.rulegen.prometheus import generate


def main(argv: list[str]) -> int:
    """Write the rule files; return 0, or 2 on an invalid config."""
    ap = argparse.ArgumentParser(prog="sloguard rules", description="generate Prometheus recording and alerting rules")
    ap.add_argument("-c", "--config", required=True, help="sloguard config file")
    ap.add_argument("-o", "--output", required=True, help="directory to write the rule files into")
    args = ap.parse_args(argv)
    try:
        source = Path(args.config).name
        files = {**generate(load_config(args.config), source), AM_EXAMPLE: alertmanager.generate(source)}
    except ConfigError as exc:
        print(f"{args.config}: invalid configuration", file=sys.stderr)
        for line in exc.errors:
            print(line, file=sys.stderr)
        return 2
    except ExprError as exc:
        print(f"{args.config}: {exc}", file=sys.stderr)
        return 2
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        where = exc.filename or out
        print(f"sloguard rules: cannot write {where}: {exc.strerror or exc} (-o must be a writable directory)",
              file=sys.stderr)
        return 2
    for name in files:
        print(out / name)
    return 0
