"""`sloguard check --online`, records part: send one probe per target and say whether its server record arrives."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping

from sloguard.config.spec import Config
from sloguard.model import ProbeResult
from sloguard.probes import PROBES, ProbeJob, jobs_from_config
from sloguard.probes.stream import make_session
from sloguard.probes.workload import pick_prompt
from sloguard.traces.join import Joiner

POLL_S = 0.1
_HINT = {
    "inband": "no in-band record in the stream: start vLLM with --enable-per-request-metrics (llama-server "
              "sends timings by itself), or set server_records: otlp or none",
    "otlp": "no engine span within {hold:g}s: point the engine at http://HOST:{port}/v1/traces with "
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf (vLLM/SGLang --otlp-traces-endpoint, TGI "
            "--otlp-endpoint via a Collector, trtllm-serve --otlp_traces_endpoint)",
}


def _describe(r: ProbeResult, waited: float | None) -> str:
    parts = [f"{name} {value * 1e3:.1f}ms" for name, value in (
        ("server TTFT", r.server_ttft_s), ("network", r.network_s), ("queue", r.queue_s),
        ("prefill", r.prefill_s), ("decode", r.server_decode_s)) if value is not None]
    after = f" {waited:.2f}s after the response" if waited is not None else ""
    return f"{r.record} record arrived{after}: " + ", ".join(parts)


async def _one(cfg: Config, job: ProbeJob, joiner: Joiner, mode: str, engine: str) -> tuple[bool, str]:
    async with make_session() as session:
        result = await PROBES[job.api](session, job, pick_prompt(job, random.Random()))
    if not result.ok:
        return False, f"probe failed ({result.error}); no record to expect"
    done = joiner.offer([(result, mode, engine)], time.time())
    start = time.monotonic()
    while not done and time.monotonic() - start < cfg.traces.hold:
        await asyncio.sleep(POLL_S)
        done = joiner.completed + joiner.due(time.time())
        joiner.completed = []
    final = done[0] if done else joiner.flush()[0]
    if final.record:
        return True, _describe(final, time.monotonic() - start if mode == "otlp" else None)
    port = cfg.traces.receiver.listen.rpartition(":")[2] if cfg.traces.receiver else "4318"
    return False, _HINT[mode].format(hold=cfg.traces.hold, port=port)


def job_ok(message: str) -> bool:
    """Return whether a records finding is about the record (the probe itself succeeded)."""
    return not message.startswith("probe failed")


async def check_records(cfg: Config, secrets: Mapping[str, str]) -> list[tuple[str, bool, str]]:
    """Return (target, ok, message) for every target with a probe and a record source."""
    targets = {t.name: t for t in cfg.targets}
    jobs = {j.target: j for j in reversed(jobs_from_config(cfg, secrets))}  # the target's first probe
    joiner = Joiner(hold=cfg.traces.hold)
    receiver = None
    if any(targets[t].server_records == "otlp" for t in jobs) and cfg.traces.receiver is not None:
        from sloguard.traces.receiver import Receiver, Settings
        from sloguard.web.listen import ListenError
        from sloguard.web.webconfig import load_web_config

        def sink(decoded: object) -> None:
            joiner.completed += joiner.add(getattr(decoded, "spans", []), time.time())

        receiver = Receiver(sink, load_web_config(cfg.traces.receiver.web_config_file),
                            Settings.of(cfg.traces.receiver))
        try:
            await receiver.start(cfg.traces.receiver.listen)
        except ListenError as exc:
            await receiver.stop()
            return [(t, False, f"{exc}: is the daemon running there? Its sloguard_request_records_total says "
                     "what arrives") for t in jobs]
    out = []
    try:
        for name, job in jobs.items():
            mode = targets[name].server_records
            if mode == "none":
                out.append((name, True, "server_records: none (no per-request record used)"))
                continue
            ok, message = await _one(cfg, job, joiner, mode, targets[name].engine)
            if not ok and "server_records" not in targets[name].model_fields_set and job_ok(message):
                # The default only uses a record when the engine sends one: its absence is a note, not a failure.
                ok, message = True, f"no per-request record (optional under the default server_records: inband): " \
                                    f"{message}"
            out.append((name, ok, message))
    finally:
        if receiver is not None:
            await receiver.stop()
    return out
