"""The `sloguard` command: one subcommand per job; helper-owned subcommands are loaded lazily."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sloguard import __version__
from sloguard.escape import terminal

if TYPE_CHECKING:
    from sloguard.config.spec import Config

# Subcommands implemented as `main(argv) -> int` in their own modules; imported only when used,
# so `sloguard check` never pays for aiohttp, numpy or slack-sdk imports.
DELEGATED: dict[str, tuple[str, str]] = {
    "probe": ("sloguard.probes.cli", "run synthetic streaming probes once and print the results"),
    "evaluate": ("sloguard.slo.cli", "evaluate probe-sourced SLOs over recorded probe results"),
    "rules": ("sloguard.rulegen.cli", "generate Prometheus recording and alerting rules"),
    "inspect-metrics": ("sloguard.sources.inspect", "parse and normalise an engine's /metrics"),
    "sim": ("sloguard.sim.cli", "run the built-in inference-server simulator"),
    "canary": ("sloguard.gpu.canary_cli", "run the GPU canary once"),
    "demo": ("sloguard.demo", "run the simulator and the daemon and show live SLO status"),
    "report": ("sloguard.reports.cli", "compare a candidate release with a baseline (regression report)"),
    "bench": ("sloguard.bench.cli", "load a target, judge it by its SLOs, find the max load at SLO"),
    "status": ("sloguard.incident.cli", "print every SLO's state and bottleneck verdict from a running daemon"),
    "notify-test": ("sloguard.alerts.notifytest", "send a marked test message through each notifier, print its answer"),
    "record": ("sloguard.recording.cli", "run the daemon and record what it sees, for `sloguard replay`"),
    "replay": ("sloguard.recording.replaycli", "replay a recording through the SLOs and the diagnosis"),
}


def _cmd_run(args: argparse.Namespace) -> int:
    from sloguard.run import serve

    return asyncio.run(serve(args.config, args.web_config_file, args.listen, args.enable_lifecycle,
                             args.max_connections))


def _cmd_check(args: argparse.Namespace) -> int:
    from sloguard.config.load import ConfigError, load_config
    from sloguard.config.secrets import read_secrets

    try:
        cfg = load_config(args.config)
        secrets = read_secrets(cfg) if args.secrets or args.online or args.notify else None
    except ConfigError as exc:
        print(exc.report(args.config), file=sys.stderr)
        return 2
    from sloguard.statedir import report

    usable, state_line = report(cfg.state_dir)
    if not usable:
        print(f"{args.config}: {state_line}", file=sys.stderr)
        return 2
    print(f"{args.config}: ok ({len(cfg.targets)} targets, {len(cfg.probes)} probes, {len(cfg.slos)} SLOs, "
          f"{len(cfg.alerts)} alerts, {len(cfg.notifiers)} notifiers)")
    print(state_line)
    _print_detection(cfg)
    from sloguard.diagnose.coverage import lines

    for line in lines(cfg):  # no blank line when no target has a coverage line
        print(line)
    online = 0
    if args.online and secrets is not None:
        online = max(_check_listen_online(cfg.listen), _check_targets_online(cfg, secrets.targets),
                     _check_records_online(cfg), _check_processes_online(cfg))
    if args.notify and secrets is not None:
        from sloguard.alerts import notifytest

        online = max(online, notifytest.report(asyncio.run(notifytest.send_all(cfg, secrets.notifiers))))
    return online


def _check_processes_online(cfg: Config) -> int:
    """Warn (stderr) for each host.processes entry that matches no running process; a warning, never a failure."""
    from sloguard.sources.processes import unmatched

    for line in unmatched(cfg.host.processes):
        print(f"warning: {line}: its CPU and restarts are not watched (diagnosis: no serving_cpu_bound)",
              file=sys.stderr)
    return 0


def _check_listen_online(listen: str) -> int:
    """Bind the listen address as `run` would; print the outcome; 1 if it cannot be bound."""
    from sloguard.web.listen import ListenError, check_listen

    try:
        check_listen(listen)
    except ListenError as exc:
        print(f"listen: {exc} (expected if this is the running sloguard's address)")
        return 1
    print(f"listen: {listen}: free")
    return 0


def _check_targets_online(cfg: Config, api_keys: dict[str, str]) -> int:
    """Scrape each target once and check /v1/models serves the probes' models; print findings; 1 on a problem."""
    from sloguard.sources.online import check_targets

    findings = asyncio.run(check_targets(cfg, api_keys))
    for f in findings:
        print(terminal(f.text), file=sys.stdout if f.ok else sys.stderr)  # model ids the server listed
    return 0 if all(f.ok for f in findings) else 1


def _check_records_online(cfg: Config) -> int:
    """Send one probe per target; print whether its server record (OTLP span or in-band) arrives; 1 if not."""
    from sloguard.config.secrets import read_secrets
    from sloguard.probes.online import check_records

    rows = asyncio.run(check_records(cfg, read_secrets(cfg).targets))
    for target, ok, message in rows:
        print(f"records: target {target}: {'ok' if ok else 'MISSING'}: {message}")
    return 0 if all(ok for _, ok, _ in rows) else 1


def _print_detection(cfg: object) -> None:
    """Print what each SLO's burn alerts can detect at the configured probe rate, and warnings to stderr."""
    from sloguard.config.spec import Config
    from sloguard.slo.detection import report

    assert isinstance(cfg, Config)
    lines, warnings = report(cfg)
    for line in lines:
        print(line)
    for line in warnings:
        print(line, file=sys.stderr)


def _cmd_config(args: argparse.Namespace) -> int:
    from sloguard.config.schema import config_schema

    print(json.dumps(config_schema(), indent=2, sort_keys=True))
    return 0


def _cmd_version(_: argparse.Namespace) -> int:
    print(f"sloguard {__version__}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sloguard", description="LLM inference latency SLO daemon and exporter.",
        epilog="First steps: `sloguard demo` (simulator + daemon, nothing to configure); with your own config "
        "(start from sloguard.example.yaml): `sloguard check -c FILE --online`, then `sloguard run -c FILE`. "
        "Run `sloguard COMMAND --help` for a command's options.")
    p.add_argument("--version", action="version", version=f"sloguard {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="run the daemon",
                         description="Run the daemon: scrape the targets, run the probes, evaluate SLOs and alerts, "
                         "serve /metrics. SIGHUP (or POST /-/reload, see --web.enable-lifecycle) reloads the config "
                         "(a bad one is refused and the old one keeps running); SIGTERM stops. Exit 2 on a bad "
                         "config at start.")
    run.add_argument("-c", "--config", required=True, metavar="FILE",
                     help="the sloguard config file (YAML; validate it with `sloguard check`)")
    run.add_argument("--web.config.file", dest="web_config_file", metavar="FILE",
                     help="exporter-toolkit web config: TLS, mTLS and basic auth for the HTTP endpoints")
    run.add_argument("--web.listen-address", dest="listen", metavar="HOST:PORT",
                     help="serve on this address instead of the config's `listen` (e.g. 127.0.0.1:9478)")
    run.add_argument("--web.enable-lifecycle", dest="enable_lifecycle", action="store_true",
                     help="allow POST /-/reload without credentials (with basic auth or client certificates in "
                     "--web.config.file, those decide; SIGHUP always reloads)")
    run.add_argument("--web.max-connections", dest="max_connections", type=int, default=512, metavar="N",
                     help="connections the web listener holds open at once (default 512, as Prometheus)")
    run.set_defaults(fn=_cmd_run)
    check = sub.add_parser("check", help="validate a config file (exit 2 on errors)",
                           description="Validate a config offline: every error as `PATH: message`, exit 2. With "
                           "--online also contact each target: is /metrics an engine page, and does /v1/models "
                           "serve the models the probes send? With --notify also send a test message through each "
                           "notifier. Exit 1 if a target or a notifier has a problem.")
    check.add_argument("-c", "--config", required=True, metavar="FILE", help="the sloguard config file (YAML)")
    check.add_argument("--secrets", action="store_true", help="also read every referenced secret")
    check.add_argument("--online", action="store_true",
                       help="also contact each target: scrape /metrics once, check /v1/models serves the probes' "
                       "models, send one probe and say whether its server record arrives (reads secrets)")
    check.add_argument("--notify", action="store_true",
                       help="also send a marked test message through every notifier and print each answer, as "
                       "`sloguard notify-test` does (reads secrets); exit 1 if one fails")
    check.set_defaults(fn=_cmd_check)
    config = sub.add_parser("config", help="print the config's JSON Schema (editor completion)",
                            description="`sloguard config schema` prints the JSON Schema of the config file.")
    config.add_argument("what", choices=["schema"], help="schema: print the JSON Schema of the config")
    config.set_defaults(fn=_cmd_config)
    sub.add_parser("version", help="print the version").set_defaults(fn=_cmd_version)
    for name, (_, help_text) in DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (2 for usage or configuration errors)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in DELEGATED:
        module = importlib.import_module(DELEGATED[args_list[0]][0])
        delegate: Callable[[list[str]], int] = module.main
        return delegate(args_list[1:])
    args = _parser().parse_args(args_list)
    fn: Callable[[argparse.Namespace], int] = args.fn
    return fn(args)


def entry() -> int:
    """The console script and `python -m sloguard`: main() behind the process guard (no tracebacks)."""
    from sloguard.guard import run_guarded

    return run_guarded(main)


if __name__ == "__main__":
    sys.exit(entry())
