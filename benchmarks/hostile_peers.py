"""Worst /metrics GET, daemon RSS and what each attack got back, for issue 47's listener and OTLP attacks.

Run: .venv/bin/python benchmarks/hostile_peers.py [--tree DIR] [--seconds 10] [--scenario NAME ...] [--rows N]

One daemon (from --tree, default this checkout: point it at an export of an older commit for "before" figures)
probes a healthy simulator that exports its spans to the daemon's receiver, behind basic auth (bcrypt cost 10)
on both listeners. Each scenario: a calm window (5 s), the attack (--seconds), a calm window after; printed:
worst and median GET in the calm windows and under attack, RSS (daemon and children) before / peak / after,
what the attack got back, and the healthy probe's failed requests and missing records during it.
`results` (last) stops the daemon, writes --rows probe results into its store, restarts it and GETs them all
from /api/v1/results while /metrics is watched.
"""

from __future__ import annotations

import argparse
import functools
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import bcrypt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import attacks
from support.procs import Proc, free_port, http_get, metric_value, sim_config, simulator, wait_until

ROOT = Path(__file__).resolve().parents[1]
CALM_S = 5.0


def start(tree: Path, tmp: Path, config: str, web: Path, port: int) -> Proc:
    (tmp / "sloguard.yaml").write_text(config)
    log = tmp / f"daemon-{port}.log"
    with log.open("ab") as fh:
        popen = subprocess.Popen([sys.executable, "-m", "sloguard", "run", "-c", str(tmp / "sloguard.yaml"),
                                  "--web.config.file", str(web)], stdout=fh, stderr=subprocess.STDOUT, cwd=tree,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
    proc = Proc(popen, port, log)
    wait_until(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() is None, 30, "the daemon")
    return proc


def window(proc: Proc, auth: dict[str, str], run: Callable[[], object]) -> tuple[attacks.Watch, object]:
    w = attacks.Watch(proc.url, proc.popen.pid, auth)
    with w.running():
        got = run()
    return w, got


def counts(proc: Proc, auth: dict[str, str]) -> tuple[float, float]:
    text = http_get(f"{proc.url}/metrics", headers=auth, timeout=60)[1].decode()
    total = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith("sloguard_probe_requests_total{") and 'outcome="success"' not in line)
    return total, metric_value(text, "sloguard_request_records_total", {"source": "missing"}) or 0.0


def scenarios(receiver: str, web: str, auth: dict[str, str], seconds: float) -> dict[str, Callable[[], object]]:
    big = attacks._spans(2048, "llm_request", attacks.VLLM)  # ~488 KB: refused by the old receiver
    small_gz = attacks.gzip_export(attacks._spans(10, "llm_request", attacks.VLLM))
    proto = {**attacks.PROTOBUF, **auth}
    return {
        "valid_exports": lambda: Counter(
            f"{kind} {status}" for kind, body, headers in (("488KB", big, proto), ("gzip", small_gz,
                                                                              {**proto, "Content-Encoding": "gzip"}))
            for status in (_post(receiver, body, headers) for _ in range(10))),
        "gzip_bomb": lambda: attacks.bomb(receiver, auth, seconds),
        "gzip_bomb_no_credentials": lambda: attacks.bomb(receiver, {}, seconds),
        "span_flood": lambda: attacks.span_flood(receiver, auth, seconds),
        "hostile_spans": lambda: attacks.hostile_spans(receiver, auth, seconds),
        "slow_bodies": lambda: attacks.slow_bodies(receiver, auth, 200, seconds),
        "slowloris_3000": lambda: attacks.slowloris(web, 3000, seconds),
        "wrong_passwords": lambda: attacks.wrong_passwords(web, seconds),
        "reloads_no_credentials": lambda: attacks.reloads(web, seconds),
    }


def _post(url: str, body: bytes, headers: dict[str, str]) -> str:
    got: Counter[str] = Counter()
    attacks.post(url, body, headers, got)
    return next(iter(got))


def report(name: str, calm: list[attacks.Watch], hit: attacks.Watch, got: object, took: float,
           probe: tuple[float, float]) -> None:
    calm_lat = [x for w in calm for x in w.latencies]
    print(f"{name:24} {took:5.1f}s  GET calm worst {max(calm_lat) * 1e3:6.0f} ms median "
          f"{statistics.median(calm_lat) * 1e3:4.0f} | attacked worst {hit.worst * 1e3:6.0f} ms median "
          f"{statistics.median(hit.latencies or [0]) * 1e3:4.0f} ({hit.failures} failed)  RSS "
          f"{min(calm[0].rss) >> 20} / {max(hit.rss) >> 20} / {calm[1].rss[-1] >> 20} MiB  probe failed "
          f"+{probe[0]:.0f} missing +{probe[1]:.0f}  {dict(got) if isinstance(got, Counter) else got}", flush=True)


def fill_store(state: Path, rows: int) -> None:
    """Write `rows` probe results (one per 0.1 s, ending 2 days ago: older than the SLOs' windows, so the
    restarted daemon's history rebuild skips them) into the daemon's store, as its own rows."""
    sys.path.insert(0, str(ROOT))
    from sloguard.model import ProbeResult
    from sloguard.store import PROBE_COLUMNS

    now = time.time() - 2 * 86400
    conn = sqlite3.connect(state / "sloguard.db")
    sql = f"INSERT INTO probe_results ({', '.join(PROBE_COLUMNS)}) VALUES ({', '.join('?' * len(PROBE_COLUMNS))})"
    base = ProbeResult(ts=0.0, probe="sim-chat", target="sim", model="m", api="chat", ok=True, ttft_s=0.05,
                       e2e_s=0.3, tpot_s=0.02, output_tokens=16)
    template = [getattr(base, c) for c in PROBE_COLUMNS]
    ts = PROBE_COLUMNS.index("ts")
    for start in range(0, rows, 50_000):
        batch = []
        for i in range(start, min(rows, start + 50_000)):
            row = list(template)
            row[ts] = now - (rows - i) * 0.1
            batch.append(row)
        conn.executemany(sql, batch)
    conn.commit()
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=ROOT, help="the sloguard source tree the daemon runs from")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--scenario", nargs="*", default=None)
    ap.add_argument("--rows", type=int, default=990_000,
                    help="probe results for the `results` scenario (the daemon's own come on top: under its 1M limit)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hostile-peers-"))
    auth = {"Authorization": attacks.basic("prometheus", "s3cret")}
    web = tmp / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{bcrypt.hashpw(b's3cret', bcrypt.gensalt(10)).decode()}'\n")
    port, receiver = free_port(), free_port()
    print(f"tree {args.tree}; load {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores", flush=True)
    os.environ["OTEL_EXPORTER_OTLP_HEADERS"] = "Authorization=" + auth["Authorization"].replace(" ", "%20")
    with simulator(tmp, extra=("--otlp-traces-endpoint", f"http://127.0.0.1:{receiver}/v1/traces",
                               "--background-rps", "0")) as sim:
        config = sim_config(sim, port, tmp / "state", probe_interval="2s", extra=(
            f"traces:\n  receiver: {{listen: '127.0.0.1:{receiver}', web_config_file: '{web}'}}\n")).replace(
            "    model: sim-llama-3-8b\n", "    model: sim-llama-3-8b\n    server_records: otlp\n", 1).replace(
            "    timeout: 900ms", "    timeout: 1900ms")
        daemon = start(args.tree, tmp, config, web, port)
        try:
            time.sleep(10)
            url = f"http://127.0.0.1:{receiver}"
            table = scenarios(url, daemon.url, auth, args.seconds)
            for name in args.scenario or [*table, "results"]:
                if name == "results":
                    daemon.stop()
                    fill_store(tmp / "state", args.rows)
                    daemon = start(args.tree, tmp, config, web, port)
                    time.sleep(5)
                    run: Callable[[], object] = functools.partial(_results, daemon.url, auth)
                else:
                    run = table[name]
                before = counts(daemon, auth)
                calm0, _ = window(daemon, auth, lambda: time.sleep(CALM_S))
                t0 = time.monotonic()
                hit, got = window(daemon, auth, run)
                took = time.monotonic() - t0
                calm1, _ = window(daemon, auth, lambda: time.sleep(CALM_S))
                after = counts(daemon, auth)
                report(name, [calm0, calm1], hit, got, took, (after[0] - before[0], after[1] - before[1]))
        finally:
            daemon.stop()
    print(f"load {os.getloadavg()[0]:.1f} at the end", flush=True)


def _results(url: str, auth: dict[str, str]) -> str:
    import urllib.request

    req = urllib.request.Request(f"{url}/api/v1/results?slice=store:0..", headers=auth)
    size = lines = 0
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            for line in resp:
                size, lines = size + len(line), lines + 1
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    return f"{lines} lines, {size >> 20} MiB"


if __name__ == "__main__":
    main()
