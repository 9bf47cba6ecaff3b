"""In-band per-request records: what an engine puts in the stream itself, without any tracing set-up.

- vLLM (`--enable-per-request-metrics`): a top-level `metrics` object in the final usage chunk:
  `queue_time_ms` (queued → scheduled), `time_to_first_token_ms` (scheduled → first token: prefill only,
  not a TTFT), `generation_time_ms` (first → last token). The server TTFT used for network/HTTP is
  queue + prefill, so the network stage also holds vLLM's API-server and tokenisation time.
- llama.cpp (`llama-server`): `timings` in the final chunk: `prompt_ms` (prefill), `predicted_ms`
  (decode: prompt done → last token), `prompt_n`, `predicted_n`. No queue time, hence no server TTFT and no
  network stage.
Pure and cheap: imported by the probe process's SSE decoder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sloguard.traces.record import ServerRecord

MS = 1e-3


def _ms(obj: Mapping[str, Any], key: str) -> float | None:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) * MS


def _count(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _vllm(obj: Mapping[str, Any]) -> ServerRecord | None:
    m = obj.get("metrics")
    if not isinstance(m, dict):
        return None
    queue, prefill = _ms(m, "queue_time_ms"), _ms(m, "time_to_first_token_ms")
    if queue is None and prefill is None:
        return None
    ttft = queue + prefill if queue is not None and prefill is not None else None
    return ServerRecord("inband", "vllm", ttft_s=ttft, queue_s=queue, prefill_s=prefill,
                        decode_s=_ms(m, "generation_time_ms"))


def _llamacpp(obj: Mapping[str, Any]) -> ServerRecord | None:
    t = obj.get("timings")
    if not isinstance(t, dict) or _ms(t, "prompt_ms") is None:
        return None
    return ServerRecord("inband", "llamacpp", prefill_s=_ms(t, "prompt_ms"), decode_s=_ms(t, "predicted_ms"),
                        output_tokens=_count(t, "predicted_n"), prompt_tokens=_count(t, "prompt_n"))


# The in-band table: one reader per engine format, tried in order; a new format is one entry.
INBAND: tuple[Callable[[Mapping[str, Any]], ServerRecord | None], ...] = (_vllm, _llamacpp)


def inband_record(obj: Mapping[str, Any]) -> ServerRecord | None:
    """Return the record one decoded stream event carries, or None (most events carry none)."""
    if "metrics" not in obj and "timings" not in obj:
        return None
    for read in INBAND:
        record = read(obj)
        if record is not None:
            return record
    return None
