"""The real daemon beside a flooding target (Part 3 of benchmarks/hostile_streams.py): RSS, worst GETs, outcomes.

The daemon probes `healthy` and `flood` (tests/support/hostile_streams.py, tiny events as fast as the socket goes)
every 1 s; daemon RSS every 5 s, worst `GET /metrics` and `GET /debug/probes?limit=500` (each polled every 1 s),
the probes' outcomes. `flood=False`: the same daemon without the flood target, for comparison.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

from tests.support.procs import free_port, http_get, start_daemon, wait_until


def _config(port: int, base: str, state: Path, flood: bool = True) -> str:
    flood_probe = "  - {name: flood, target: flood, interval: 1s, timeout: 900ms, max_tokens: 64}\n" if flood else ""
    return f"""version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
targets:
  - {{name: healthy, engine: openai, api_url: "{base}/healthy", model: m}}
  - {{name: flood, engine: openai, api_url: "{base}/flood", model: m}}
probes:
  - {{name: healthy, target: healthy, interval: 1s, timeout: 900ms, max_tokens: 16}}
{flood_probe}"""


def _get_ms(url: str) -> float:
    start = time.perf_counter()
    status, _ = http_get(url, timeout=60)
    assert status == 200, (url, status)
    return (time.perf_counter() - start) * 1e3


def daemon_flood(base: str, minutes: float, flood: bool = True) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        proc = start_daemon(Path(tmp), _config(port, base, Path(tmp) / "state", flood))
        first = b'outcome="event_flood"' if flood else b'outcome="success"'
        try:
            ps = psutil.Process(proc.popen.pid)
            wait_until(lambda: first in http_get(f"{proc.url}/metrics")[1], 60, "a first result")
            rss0 = ps.memory_info().rss
            rss, metrics_ms, debug_ms = [rss0], [], []
            end = time.monotonic() + minutes * 60
            while time.monotonic() < end:
                metrics_ms.append(_get_ms(f"{proc.url}/metrics"))
                debug_ms.append(_get_ms(f"{proc.url}/debug/probes?limit=500"))
                if len(metrics_ms) % 5 == 0:
                    rss.append(ps.memory_info().rss)
                time.sleep(max(0.0, 1.0 - (metrics_ms[-1] + debug_ms[-1]) / 1e3))
            text = http_get(f"{proc.url}/metrics")[1].decode()
        finally:
            proc.stop()
    counts = [line for line in text.splitlines() if line.startswith("sloguard_probe_requests_total")]
    mib = 1 / (1 << 20)
    print(f"\nPart 3: daemon probing healthy{' + flood' if flood else ' only (baseline)'} every 1 s "
          f"for {minutes:g} min")
    print(f"RSS after the first result {rss0 * mib:.1f} MiB, peak {max(rss) * mib:.1f} MiB, "
          f"end {rss[-1] * mib:.1f} MiB: growth {(rss[-1] - rss0) * mib:+.1f} MiB "
          f"(peak {(max(rss) - rss0) * mib:+.1f})")
    print(f"GET /metrics: median {np.median(metrics_ms):.1f} ms, worst {max(metrics_ms):.1f} ms "
          f"({len(metrics_ms)} GETs); GET /debug/probes?limit=500: median {np.median(debug_ms):.1f} ms, "
          f"worst {max(debug_ms):.1f} ms")
    print("\n".join(counts))
