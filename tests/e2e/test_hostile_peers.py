"""Hostile peers of the web listener and the OTLP receiver (issue 47's findings 2, 3, 5, 9-14), each against one
real daemon probing a healthy simulator whose real OpenTelemetry SDK exporter sends its spans gzipped, with basic
auth inherited from --web.config.file.

Every attack asserts: the daemon's memory (RSS of it and its children) grows by a bounded amount; the worst
/metrics GET while attacked stays within 250 ms of the worst GET in the unattacked windows just before and just
after it (a loaded 2-core runner moves all three; the attacks run in a process of their own); the healthy probe
fails no request and (OTLP attacks) loses no server record; the attack is answered as designed.
Figures: benchmarks/hostile_peers.py.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import bcrypt
import pytest
from support.attacks import (
    Watch,
    basic,
    bomb,
    favour,
    gzip_bomb,
    hostile_spans,
    post,
    slow_bodies,
    slowloris,
    span_flood,
    unauthenticated,
    wrong_passwords,
)
from support.procs import Proc, free_port, http_get, metric_value, sim_config, simulator, start_daemon, wait_until

pytestmark = pytest.mark.e2e
WINDOW_S = 2.5
CALM_S = 1.5  # unattacked windows before and after each attack: the latency baseline
# What an attack may add to the worst GET (issue 47: <= 250 ms), over the worse of: the worst GET of the calm
# windows around it, and the longest evaluation cycle the daemon itself recorded while attacked. Measured on this
# 2-core machine at load 20-30 (other jobs): calm worst GETs 170-990 ms, evaluation cycles 300-500 ms.
EXTRA_LATENCY_S = 0.25
# Memory an attack may add, daemon and children: bodies in flight (2 x 20 MiB) + the decoder inflating and parsing
# one 20 MiB body (~3x) + held spans (16 MiB per lane), with room for allocator slack. Before: +391 to +565 MiB.
OTLP_RSS_BOUND = 200 << 20
WEB_RSS_BOUND = 64 << 20  # 512 connections at ~40 KiB each (aiohttp protocol, parser, buffers) + slack


@dataclass
class Rig:
    sim: Proc
    daemon: Proc
    receiver: str
    auth: dict[str, str]
    attacker: ProcessPoolExecutor

    def metrics(self) -> str:
        status, body = http_get(f"{self.daemon.url}/metrics", headers=self.auth, timeout=30)
        assert status == 200
        return body.decode()


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("hostile")
    port, receiver = free_port(), free_port()
    auth = {"Authorization": basic("prometheus", "s3cret")}
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=10)).decode()  # htpasswd's default cost
    (tmp / "web.yml").write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    endpoint = f"http://127.0.0.1:{receiver}/v1/traces"
    # The attacks run in a process of their own, so building their requests never delays this process's GETs.
    attacker = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
    for size in (1 << 30, 256 << 20):  # built once (~1 s), before any window is measured
        attacker.submit(gzip_bomb, size).result()
    with pytest.MonkeyPatch.context() as env:
        # The simulator's real SDK exporter: gzip, as a Collector's otlphttp exporter, and the web config's auth.
        env.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        env.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=" + auth["Authorization"].replace(" ", "%20"))
        with simulator(tmp, extra=("--otlp-traces-endpoint", endpoint, "--otlp-schedule-delay-ms", "100",
                                   "--background-rps", "0")) as sim:
            # A long probe timeout: a loaded runner must not fail a healthy probe, only an attack may.
            text = sim_config(sim, port, tmp / "state", probe_interval="2s",
                              extra=f"traces:\n  receiver: {{listen: '127.0.0.1:{receiver}'}}\n").replace(
                "    model: sim-llama-3-8b\n", "    model: sim-llama-3-8b\n    server_records: otlp\n", 1).replace(
                "    timeout: 900ms", "    timeout: 1900ms")
            daemon = start_daemon(tmp, text, extra=("--web.config.file", str(tmp / "web.yml")))
            r = Rig(sim, daemon, f"http://127.0.0.1:{receiver}", auth, attacker)
            try:
                wait_until(lambda: (metric_value(r.metrics(), "sloguard_request_records_total",
                                                 {"source": "otlp"}) or 0) >= 2, 60, "joined gzip records")
                for proc in (sim, daemon):
                    favour(proc.popen.pid)
                yield r
            finally:
                daemon.stop()
                attacker.shutdown()


def _counts(text: str) -> dict[str, float]:
    def total(name: str, **labels: str) -> float:
        out = 0.0
        for line in text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                out += float(line.rsplit(" ", 1)[1])
        return out

    failed = total("sloguard_probe_requests_total") - total("sloguard_probe_requests_total", outcome="success") \
        - total("sloguard_probe_requests_total", outcome="empty")  # empty: succeeded with only EOS
    return {"failed": failed, "missing": total("sloguard_request_records_total", source="missing"),
            "otlp": total("sloguard_request_records_total", source="otlp")}


def attacked(rig: Rig, rss_bound: int, attack: Callable[..., Counter[str]], *args: Any,
             records: bool = True) -> Counter[str]:
    """Run `attack` between two calm windows; assert latency, memory and the healthy probe's results."""
    before = _counts(rig.metrics())
    watch = [Watch(rig.daemon.url, rig.daemon.popen.pid, rig.auth) for _ in range(3)]
    with watch[0].running():
        time.sleep(CALM_S)
    with watch[1].running():
        got = rig.attacker.submit(attack, *args).result()
    with watch[2].running():
        time.sleep(CALM_S)
    calm, hit = max(watch[0].worst, watch[2].worst), watch[1]
    after = _counts(rig.metrics())
    base = min(watch[0].rss)
    print(f"calm worst {calm * 1e3:.0f} ms, attacked worst {hit.worst * 1e3:.0f} ms ({hit.failures} failed; longest "
          f"evaluation {hit.longest_evaluation * 1e3:.0f} ms); RSS {base >> 20} -> peak {max(hit.rss) >> 20} MiB; "
          f"{dict(got)}; healthy probe {before} -> {after}")
    # A GET waits for at most one evaluation cycle (it runs on the loop); the daemon's own record of the longest
    # cycle in the window says how long a loaded runner made that. An attack that blocked the loop would show.
    assert hit.failures == 0 and hit.worst <= max(calm, hit.longest_evaluation) + EXTRA_LATENCY_S
    assert max(hit.rss) - base <= rss_bound
    assert after["failed"] == before["failed"]
    if records:
        assert after["missing"] == before["missing"] and after["otlp"] > before["otlp"]
    return got


def test_gzip_bomb_from_three_senders(rig: Rig) -> None:
    got = attacked(rig, OTLP_RSS_BOUND, bomb, rig.receiver, rig.auth, WINDOW_S, 1 << 30)  # 1 MiB -> 1 GiB
    assert set(got) == {"413"}


def test_unauthenticated_bombs_and_reloads_are_refused_before_any_work(rig: Rig) -> None:
    got = attacked(rig, OTLP_RSS_BOUND, unauthenticated, rig.daemon.url, rig.receiver, WINDOW_S)
    assert set(got) == {"401"} and got["401"] > 10
    assert "config reloaded" not in rig.daemon.output()


def test_span_flood_on_unkeyed_probe_ids_cannot_evict_probe_spans(rig: Rig) -> None:
    got = attacked(rig, OTLP_RSS_BOUND, span_flood, rig.receiver, rig.auth, WINDOW_S)
    assert set(got) == {"200"}
    assert (metric_value(rig.metrics(), "sloguard_trace_spans_total", {"outcome": "overflow"}) or 0) > 0


def test_huge_attributes_nan_infinity_and_absurd_times(rig: Rig) -> None:
    got = attacked(rig, OTLP_RSS_BOUND, hostile_spans, rig.receiver, rig.auth, WINDOW_S)
    assert set(got) == {"200"}
    text = rig.metrics()
    for reason in ("not_finite", "out_of_range", "in_future"):
        assert (metric_value(text, "sloguard_invalid_input_total", {"source": "otlp", "reason": reason}) or 0) > 0
    sums = [float(v) for v in re.findall(r"^sloguard_request_stage_seconds_sum\{.*\} (\S+)$", text, re.M)]
    assert sums and all(math.isfinite(v) for v in sums)
    assert (metric_value(text, "sloguard_trace_pending_span_bytes") or 0) <= 2 * 16 << 20


def test_slow_bodies_to_the_receiver(rig: Rig) -> None:
    got = attacked(rig, OTLP_RSS_BOUND, slow_bodies, rig.receiver, rig.auth, 40, WINDOW_S)
    assert got["sent"] == 40


def test_slowloris_beyond_the_connection_cap(rig: Rig) -> None:
    got = attacked(rig, WEB_RSS_BOUND, slowloris, rig.daemon.url, 700, WINDOW_S, records=False)
    assert got["closed_by_daemon"] >= 700 - 512  # the cap held: the oldest slow heads were evicted
    assert (metric_value(rig.metrics(), "sloguard_listener_connections_dropped_total",
                         {"listener": "web", "reason": "evicted"}) or 0) >= 700 - 512


def test_flood_of_wrong_passwords(rig: Rig) -> None:
    got = attacked(rig, WEB_RSS_BOUND, wrong_passwords, rig.daemon.url, WINDOW_S, records=False)
    assert set(got) <= {"401", "503"} and got["401"] > 0


def test_receiver_inherits_the_web_configs_auth(rig: Rig) -> None:
    got = Counter[str]()
    post(rig.receiver, b"", {"Content-Type": "application/x-protobuf"}, got)
    post(rig.receiver, b"", {"Content-Type": "application/x-protobuf", **rig.auth}, got)
    assert got == Counter({"401": 1, "200": 1}), got


def _spans_total(text: str) -> float:
    return sum(float(v) for v in re.findall(r"^sloguard_trace_spans_total\{.*\} (\S+)$", text, re.M))


@pytest.fixture(scope="module")
def sdk_spans() -> list[Any]:
    """8,192 vLLM-shaped spans of other traffic (vLLM traces every request, not only probes'), made by the SDK."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind
    from support.attacks import VLLM

    memory = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("vllm.llm_engine")
    for _ in range(8192):
        tracer.start_span("llm_request", kind=SpanKind.SERVER, attributes={**VLLM, "gen_ai.usage.prompt_tokens": 64},
                          ).end()
    return list(memory.get_finished_spans())


def test_real_sdk_exporter_batches_of_1_512_and_8192_spans_gzipped_and_not(rig: Rig, sdk_spans: list[Any]) -> None:
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    text = rig.metrics()
    before, counted = _counts(text), _spans_total(text)
    malformed = metric_value(text, "sloguard_trace_spans_total", {"outcome": "malformed"})
    for compression in (Compression.Gzip, Compression.NoCompression):
        exporter = OTLPSpanExporter(endpoint=f"{rig.receiver}/v1/traces", headers=rig.auth, timeout=30,
                                    compression=compression)
        for n in (1, 512, 8192):  # before: gzip refused 10/10, bodies over ~120-240 KB (512 spans: 427 KB) 1 in 3
            assert exporter.export(sdk_spans[:n]) == SpanExportResult.SUCCESS, (compression, n)
        exporter.shutdown()
    # Every span ends in an outcome (overflow at once, foreign when its 3 s wait ends); the simulator's own may add.
    wait_until(lambda: _spans_total(rig.metrics()) >= counted + 2 * (1 + 512 + 8192), 10, "every span accounted for")
    text = rig.metrics()
    assert _counts(text)["failed"] == before["failed"]
    assert metric_value(text, "sloguard_trace_spans_total", {"outcome": "malformed"}) == malformed
