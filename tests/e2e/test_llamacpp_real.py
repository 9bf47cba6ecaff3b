"""Against a real llama.cpp `llama-server` (built from source by scripts/build-llama-server.sh, tiny random model):
engine auto-detection, chat and completions probes checked against the server's own accounting, the daemon's
`sloguard_server_*` for it, and the llama.cpp column of docs/engines.md checked against what the server really exposes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.llama import LlamaServer, llama_server  # noqa: F401  (session fixture)
from support.procs import ROOT, free_port, http_get, http_post, metric_value, start_daemon, wait_until

from sloguard.sources.engines import normalise
from sloguard.sources.engines.provenance import CANONICAL
from sloguard.sources.parse import parse_text

pytestmark = pytest.mark.e2e
MAX_TOKENS = 16


def _config(server: LlamaServer, port: int, state: Path, api: str = "chat", model: str | None = None) -> str:
    return f"""version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
gpu: {{nvml: "off"}}
targets:
  - name: llama
    engine: auto
    metrics_url: {server.url}/metrics
    api_url: {server.url}
    model: {model or server.model}
    scrape_interval: 1s
    scrape_timeout: 900ms
probes:
  - {{name: p, target: llama, api: {api}, interval: 2s, timeout: 1900ms, max_tokens: {MAX_TOKENS}, ignore_eos: true,
     prompts: [{{tokens: 48}}]}}
"""


def _counters(server: LlamaServer) -> dict[str, float]:
    status, body = http_get(f"{server.url}/metrics")
    assert status == 200
    return {s.name: s.value for s in parse_text(body.decode()) if s.name.startswith("llamacpp:")}


def _sloguard(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sloguard", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, check=False)


def test_engine_auto_detects_llamacpp_from_its_metrics(llama_server: LlamaServer) -> None:  # noqa: F811
    out = _sloguard("inspect-metrics", f"{llama_server.url}/metrics", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["engine"] == "llamacpp"
    assert set(doc["models"]) == {"default"}  # llama.cpp has no model label: the target's model names it


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_probe_agrees_with_the_servers_own_accounting(llama_server: LlamaServer, tmp_path: Path,  # noqa: F811
                                                      api: str) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(_config(llama_server, free_port(), tmp_path / "state", api))
    before = _counters(llama_server)
    out = _sloguard("probe", "-c", str(cfg), "--once", "--json")
    after = _counters(llama_server)
    assert out.returncode == 0, out.stdout + out.stderr
    r: dict[str, Any] = json.loads(out.stdout.splitlines()[0])
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    # Tokens: the probe reads the server's usage, which must match what the server counted for this request.
    assert r["output_tokens"] == MAX_TOKENS == delta["llamacpp:tokens_predicted_total"]
    assert r["prompt_tokens"] == delta["llamacpp:prompt_tokens_total"] + delta["llamacpp:prompt_tokens_cached_total"]
    # Times: llama.cpp's own prompt and generation times (the `timings` of its response, summed into these
    # counters) bound the client-side ones from below; loopback HTTP adds little above them.
    prompt_s, decode_s = delta["llamacpp:prompt_seconds_total"], delta["llamacpp:tokens_predicted_seconds_total"]
    assert prompt_s > 0 and decode_s > 0
    assert prompt_s <= r["ttft_s"] <= prompt_s + 2.0
    assert r["ttft_s"] < r["e2e_s"]
    assert prompt_s + decode_s <= r["e2e_s"] + 1e-3
    assert r["e2e_s"] - r["ttft_s"] <= decode_s + 2.0
    assert r["tpot_s"] == pytest.approx((r["e2e_s"] - r["ttft_s"]) / (MAX_TOKENS - 1))


def test_check_online_names_a_model_the_server_does_not_serve(llama_server: LlamaServer,  # noqa: F811
                                                               tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(_config(llama_server, free_port(), tmp_path / "state", model="no-such-model"))
    out = _sloguard("check", "-c", str(cfg), "--online")
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"target llama: model no-such-model not served (served: {llama_server.model})" in out.stderr
    cfg.write_text(_config(llama_server, free_port(), tmp_path / "state"))
    out = _sloguard("check", "-c", str(cfg), "--online")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "target llama: llamacpp engine, serves tiny-random-llama" in out.stdout


def test_daemon_exports_server_signals_for_llamacpp(llama_server: LlamaServer, tmp_path: Path) -> None:  # noqa: F811
    port = free_port()
    daemon = start_daemon(tmp_path, _config(llama_server, port, tmp_path / "state"))
    try:
        def exported() -> str | None:
            text = http_get(f"{daemon.url}/metrics")[1].decode()
            ids = {"model": "tiny-random-llama", "target": "llama", "replica": llama_server.url.removeprefix("http://")}
            want = (metric_value(text, "sloguard_server_tpot_mean_seconds", {**ids, "window": "1m"}),
                    metric_value(text, "sloguard_server_generation_tokens_per_second", ids))
            return text if all(w is not None for w in want) else None

        wait_until(lambda: exported() is not None, 60, "sloguard_server_* for the llama-server target")
        text = exported() or ""
        counters = _counters(llama_server)
        assert metric_value(text, "sloguard_source_up", {"source": "scrape", "target": "llama"}) == 1.0
        assert metric_value(text, "sloguard_server_requests_running", {"target": "llama"}) is not None
        assert metric_value(text, "sloguard_server_requests_waiting", {"target": "llama"}) is not None
        tpot = metric_value(text, "sloguard_server_tpot_mean_seconds", {"target": "llama", "window": "1m"})
        lifetime = counters["llamacpp:tokens_predicted_seconds_total"] / counters["llamacpp:tokens_predicted_total"]
        assert tpot is not None and 0 < tpot < 10 * lifetime + 0.05  # the window's mean, same order as lifetime's
        assert (metric_value(text, "sloguard_probe_requests_total", {"probe": "p", "outcome": "success"}) or 0) >= 1
        assert "Traceback" not in daemon.output()
    finally:
        daemon.stop()


def readme_column(engine_header: str) -> dict[str, str]:
    """Return {row key: cell} of one engine column of the engine table in docs/engines.md."""
    lines = (ROOT / "docs" / "engines.md").read_text().split("# Engines: which signals each one has", 1)[1].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| "))
    rows = [ln for ln in lines[start:] if ln.startswith("|")]
    rows = rows[: next((i for i, ln in enumerate(lines[start:]) if not ln.startswith("|")), len(rows))]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    col = header.index(engine_header)
    out = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        out[re.sub(r"^`sloguard_server_|^`|`$", "", cells[0]).rstrip("`")] = cells[col]
    return out


def test_readme_llamacpp_column_matches_the_real_server(llama_server: LlamaServer) -> None:  # noqa: F811
    status, _ = http_post(f"{llama_server.url}/v1/completions", {"model": llama_server.model, "prompt": "hello",
                                                                   "max_tokens": 4}, timeout=60)
    assert status == 200
    page = http_get(f"{llama_server.url}/metrics")[1].decode()
    mv = normalise(parse_text(page), "auto", "llama", 0.0, "m").models["m"]
    column = readme_column("llama.cpp")
    assert set(column) == {f"{k}{{reason}}" if k == "requests_finished_per_second" else k for k in CANONICAL}
    signals = {*mv.histograms, *mv.gauges, *mv.counters, *(["requests_finished"] if mv.finished_by_reason else [])}
    for row, cell in column.items():
        _, parts = CANONICAL[row.removesuffix("{reason}")]
        present = set(parts or ["requests_finished"]) <= signals
        if cell == "—":
            assert not present, f"docs/engines.md says llama.cpp has no {row}, but it is read from the real server"
        elif "older releases" not in cell:
            assert present, f"docs/engines.md says llama.cpp has {row} ({cell}), the real server does not give it"
