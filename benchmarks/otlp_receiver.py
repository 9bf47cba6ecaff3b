"""The event loop's worst stall while one OTLP body is inflated and decoded: on the loop, in a thread, in the
decoder process (what the receiver does).

Run: .venv/bin/python benchmarks/otlp_receiver.py [--spans 60000] [--repeat 3]

A 1 ms ticker runs on the loop; the figure is the longest gap between two ticks minus 1 ms, while one body
(vLLM-shaped spans, gzipped, and the same as OTLP/HTTP JSON) is decoded each way. Also prints the body sizes
and each way's wall time. Protobuf's FromString and json.loads are single C calls holding the GIL, so a thread
does not help them; the process does.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sloguard.traces.decoder import BodyLimits, Decoder, work
from sloguard.traces.otlp import Window


def bodies(n: int) -> tuple[bytes, bytes]:
    """Return (gzipped protobuf, gzipped OTLP JSON) requests of n vLLM-shaped spans ending now (JSON: at most
    35,000, under the receiver's 500,000 JSON objects)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req, now = ExportTraceServiceRequest(), time.time_ns()
    ss = req.resource_spans.add().scope_spans.add()
    spans = []
    for _ in range(n):
        s = ss.spans.add()
        s.trace_id, s.span_id, s.parent_span_id, s.name = os.urandom(16), os.urandom(8), os.urandom(8), "llm_request"
        s.start_time_unix_nano, s.end_time_unix_nano = now - 10**8, now
        attrs = []
        for k in ("time_to_first_token", "time_in_queue", "time_in_model_prefill", "time_in_model_decode", "e2e"):
            a = s.attributes.add()
            a.key, a.value.double_value = f"gen_ai.latency.{k}", 0.0123
            attrs.append({"key": a.key, "value": {"doubleValue": 0.0123}})
        spans.append({"traceId": s.trace_id.hex(), "spanId": s.span_id.hex(), "parentSpanId": s.parent_span_id.hex(),
                      "name": s.name, "kind": 2, "startTimeUnixNano": str(now - 10**8),
                      "endTimeUnixNano": str(now), "attributes": attrs})
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": spans[:35_000]}]}]}
    return gzip.compress(req.SerializeToString()), gzip.compress(json.dumps(doc).encode())


async def stall(run: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Return (worst tick gap beyond 1 ms, wall time) while `run` completes."""
    loop, worst, done = asyncio.get_running_loop(), 0.0, False

    async def ticker() -> None:
        nonlocal worst
        last = loop.time()
        while not done:
            await asyncio.sleep(0.001)
            now = loop.time()
            worst, last = max(worst, now - last - 0.001), now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    t0 = time.perf_counter()
    await run()
    wall = time.perf_counter() - t0
    done = True
    await tick
    return worst, wall


async def main(spans: int, repeat: int) -> None:
    pb, js = bodies(spans)
    limits = BodyLimits(256 << 20, 1000.0)
    decoder = Decoder(limits, keep_raw=False)
    decoder.start()
    await asyncio.sleep(2)  # the worker's imports
    print(f"{spans} spans: protobuf {len(pb) >> 10} KiB gzipped, JSON ({min(spans, 35_000)}) {len(js) >> 10} KiB "
          "gzipped; "
          f"load {os.getloadavg()[0]:.1f}")
    for name, body, is_json in (("protobuf", pb, False), ("json", js, True)):
        window = Window(time.time_ns())
        ways: dict[str, Callable[[], Awaitable[object]]] = {
            "on the loop": lambda b=body, j=is_json, w=window: asyncio.sleep(0, work(b, "gzip", j, limits, False, w)),
            "in a thread": lambda b=body, j=is_json, w=window: asyncio.to_thread(work, b, "gzip", j, limits, False, w),
            "in the decoder process": lambda b=body, j=is_json, w=window: decoder.decode(b, "gzip", j, w),
        }
        for way, run in ways.items():
            results = [await stall(run) for _ in range(repeat)]
            print(f"  {name:8} {way:24} worst loop stall {max(r[0] for r in results) * 1e3:7.1f} ms, "
                  f"wall {min(r[1] for r in results) * 1e3:7.1f} ms")
    decoder.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=60_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    asyncio.run(main(args.spans, args.repeat))
