"""`sloguard sim`: run the simulated vLLM server until SIGTERM/SIGINT (then exit 0 within ~1 s)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from sloguard.sim.profiles import PROFILES
from sloguard.sim.replicas import parse_fault
from sloguard.sim.server import start
from sloguard.sim.simulator import DEFAULT_BACKGROUND_RPS, DEFAULT_ENGINE_VERSION, DEFAULT_MODEL
from sloguard.web.listen import describe


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def _fault(value: str) -> tuple[int, dict[str, object]]:
    try:
        return parse_fault(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    """Return the `sloguard sim` argument parser."""
    ap = argparse.ArgumentParser(prog="sloguard sim", description="Simulated vLLM server (OpenAI API + "
                                 "vLLM V1 /metrics + fault injection at /sim/faults).")
    ap.add_argument("--listen", type=_listen, default=("127.0.0.1", 8000), help="HOST:PORT (port 0: any free)")
    ap.add_argument("--seed", type=int, default=0, help="seed of every random draw")
    ap.add_argument("--model", default=DEFAULT_MODEL, help="served model name")
    ap.add_argument("--max-batch", type=int, default=None, help="max running requests (default 32)")
    ap.add_argument("--background-rps", type=float, default=DEFAULT_BACKGROUND_RPS,
                    help="seeded Poisson background load in requests/s (0: none)")
    ap.add_argument("--time-scale", type=float, default=1.0, help="multiply every model time (0.1: 10x faster)")
    ap.add_argument("--otlp-traces-endpoint", default=None,
                    help="export a vLLM-shaped span per request to this OTLP/HTTP URL (.../v1/traces)")
    ap.add_argument("--enable-per-request-metrics", action="store_true",
                    help="vLLM's per-request `metrics` object (queue, prefill, generation ms) in the usage chunk")
    ap.add_argument("--max-model-len", type=int, default=None,
                    help="context length in tokens (default 32768): longer requests get a 400 unless a fault says")
    ap.add_argument("--spec-tokens", type=int, default=0,
                    help="export vLLM's speculative-decoding counters for drafts of this many tokens (0: off)")
    ap.add_argument("--otlp-schedule-delay-ms", type=int, default=200, help="span batch delay (vLLM: 5000)")
    ap.add_argument("--replicas", type=int, default=1,
                    help="serve this many simulated replicas behind a round-robin front; replica i also under "
                         "/replicas/i/ (its own /metrics and /sim/faults)")
    ap.add_argument("--replica-fault", action="append", type=_fault, default=[], metavar="INDEX:JSON",
                    help='start replica INDEX with these faults, e.g. 1:\'{"gpu_clock_ratio": 0.3}\' (repeatable)')
    ap.add_argument("--engine-profile", choices=PROFILES, default="vllm",
                    help="expose only this engine's metrics, head timing and stream shape (default vllm)")
    ap.add_argument("--engine-version", default=None,
                    help=f"what GET /version answers (default {DEFAULT_ENGINE_VERSION}): a release identity")
    return ap


async def serve(args: argparse.Namespace) -> int:
    """Serve until a termination signal; print the URL once listening."""
    host, port = args.listen
    runner, bound = await start(host, port, seed=args.seed, model=args.model, max_batch=args.max_batch,
                                background_rps=args.background_rps, time_scale=args.time_scale,
                                otlp_traces_endpoint=args.otlp_traces_endpoint,
                                otlp_schedule_delay_ms=args.otlp_schedule_delay_ms,
                                per_request_metrics=args.enable_per_request_metrics,
                                max_model_len=args.max_model_len, spec_tokens=args.spec_tokens,
                                engine_version=args.engine_version, replicas=args.replicas,
                                replica_faults=args.replica_fault, engine_profile=args.engine_profile)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on http://{shown}:{bound}", flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
    return 0


def main(argv: list[str]) -> int:
    """Run `sloguard sim` with `argv` (without the program and subcommand names); return the exit code."""
    args = build_parser().parse_args(argv)
    if not 1 <= args.replicas <= 64 or any(i >= args.replicas for i, _ in args.replica_fault):
        print("sloguard sim: --replicas must be 1..64 and each --replica-fault index below it", file=sys.stderr)
        return 2
    try:
        return asyncio.run(serve(args))
    except BrokenPipeError:
        raise  # stdout closed: the process guard's business, not a listen problem
    except OSError as exc:
        host, port = args.listen
        print(f"sloguard sim: {describe(f'{host}:{port}', exc)}; pick another with --listen HOST:PORT",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
