"""A store written before measured stages existed opens, gains the columns, and round-trips new results."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sloguard.model import ProbeResult
from sloguard.store import Store

OLD_COLUMNS = ("ts", "probe", "target", "model", "api", "ok", "error", "status_code", "connect_s", "ttft_s",
               "ttfot_s", "e2e_s", "tpot_s", "itl_p50_s", "itl_p99_s", "itl_max_s", "prompt_tokens",
               "output_tokens", "prompt_bucket", "trace_id")


def test_old_file_is_migrated_and_measured_stages_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sloguard.db"
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE probe_results ({', '.join(OLD_COLUMNS)})")
    conn.execute(f"INSERT INTO probe_results VALUES ({', '.join('?' * len(OLD_COLUMNS))})",
                 (1.0, "p", "t", "m", "chat", 1, None, 200, 0.0, 0.05, 0.05, 0.4, 0.01, 0.01, 0.02, 0.03, 64,
                  32, "short", "ab" * 16))
    conn.commit()
    conn.close()
    store = Store(path)
    new = ProbeResult(ts=2.0, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=0.05,
                      trace_id="cd" * 16, record="otlp", server_ttft_s=0.04, network_s=0.01, queue_s=0.001,
                      prefill_s=0.039, server_decode_s=0.3)
    store.add_probe_results([new])
    old, back = store.probe_results_since(0.0)
    store.close()
    assert old.record == "" and old.network_s is None and old.ttft_s == 0.05
    assert back == new
