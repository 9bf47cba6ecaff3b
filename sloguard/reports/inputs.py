"""What `--baseline` / `--candidate` name: a bench results file, a store slice or a Prometheus query."""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sloguard import __version__
from sloguard.reports.data import DataError, Side
from sloguard.reports.regression import Settings


@dataclass
class Context:
    """What every input may need: the config's SLOs and state_dir, a daemon URL, the secrets to scrub."""

    state_dir: str | None = None
    daemon: str | None = None
    slos: list[dict[str, Any]] | None = None
    secrets: list[str] = field(default_factory=list)
    config_sha256: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Context:
        """Return the context of the command line; DataError for a config that cannot be read."""
        ctx = cls(state_dir=args.state_dir, daemon=args.daemon)
        if args.config:
            from sloguard.config.load import ConfigError, load_config
            from sloguard.config.secrets import read_secrets
            from sloguard.reports.slos import slo_json
            from sloguard.slo.model import slos_from_config

            try:
                cfg = load_config(args.config)
                secrets = read_secrets(cfg, strict=False)  # only scrubbed from the report: none is needed
            except ConfigError as exc:
                raise DataError(f"{args.config}: invalid configuration: {'; '.join(exc.errors)}") from None
            ctx.slos = [slo_json(s) for s in slos_from_config(cfg) if s.source == "probe"]
            ctx.config_sha256 = file_digest(args.config)
            ctx.state_dir = ctx.state_dir or cfg.state_dir
            ctx.secrets = [*secrets.targets.values(), *secrets.notifiers.values()]
        return ctx

    def settings(self, seed: int, reps: int, thresholds: dict[str, float]) -> Settings:
        """Return the comparison settings."""
        if reps < 100:
            raise ValueError(f"--replicates {reps}: at least 100 are needed for stable intervals")
        return Settings(reps=reps, seed=seed, thresholds=thresholds)

    def scrub(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Return the document with every known secret (and every one registered for the log) replaced."""
        from sloguard.log import REDACTED, redact

        raw = json.dumps(doc)
        for s in self.secrets:
            raw = raw.replace(json.dumps(s)[1:-1], REDACTED)
        out: dict[str, Any] = json.loads(redact(raw))
        return out


def file_digest(path: str) -> str:
    """Return the SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_sides(specs: list[str], role: str, ctx: Context) -> Side:
    """Return the side one spec names, or the pooled side of several bench files; DataError says what is wrong."""
    if len(specs) == 1:
        return load_side(specs[0], role, ctx)
    if other := next((s for s in specs if s.startswith(("store:", "prom:"))), None):
        raise DataError(f"{role} {other}: only bench results files can be pooled (several per side); a store: or "
                        "prom: input takes a time range instead")
    from sloguard.reports.pool import pool

    return pool([load_side(s, role, ctx) for s in specs])


def load_side(spec: str, role: str, ctx: Context) -> Side:
    """Return the side a spec names; DataError says what is wrong with it."""
    if spec.startswith(("store:", "prom:")):
        if spec.startswith("store:"):
            from sloguard.reports.storeslice import read_store

            side = read_store(spec, role, ctx.state_dir, ctx.daemon)
        else:
            from sloguard.reports.prom import read_prom

            side = read_prom(spec, role, ctx.slos)
        # production data: this sloguard read it, judged against the config given (if any)
        side.environment = {"sloguard_version": __version__, "config_sha256": ctx.config_sha256, **side.environment}
        return side
    from sloguard.reports.bench import read_bench

    return read_bench(spec, role)
