"""A real llama.cpp `llama-server` for e2e tests: built by scripts/build-llama-server.sh, serving a tiny random model.

The model is a 2-layer llama with random weights written by the `gguf` package, with the tokenizer of the
vocab-only GGUF that llama.cpp ships (`ggml-vocab-llama-spm.gguf`): real tokenisation, real sampling, real
`/metrics`, gibberish text. Use it from any test module:

    from support.llama import llama_server  # noqa: F401  (the session fixture)

    def test_x(llama_server: LlamaServer) -> None:
        ... llama_server.url, llama_server.model ...
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from support.procs import ROOT, Proc, free_port, http_get, wait_until

MODEL_ALIAS = "tiny-random-llama"
# ChatML, so /v1/chat/completions works without llama.cpp guessing a template.
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def llama_dir() -> Path:
    """Return the installed llama-server directory, building it (cached under .tools/) when missing."""
    out = subprocess.run([str(ROOT / "scripts" / "build-llama-server.sh")], check=False, capture_output=True,
                         text=True, timeout=3600)
    if out.returncode != 0:
        raise AssertionError(f"building llama-server failed:\n{out.stderr[-4000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def write_tiny_model(path: Path, vocab: Path, seed: int = 0, n_embd: int = 64, n_layer: int = 2,
                     context: int = 1024) -> Path:
    """Write a random-weight llama GGUF (F32) with the tokenizer copied from the vocab-only GGUF `vocab`."""
    import gguf

    reader = gguf.GGUFReader(vocab)
    tokens = [bytes(p).decode("utf-8") for p in _array(reader, "tokenizer.ggml.tokens")]
    scores = [float(p[0]) for p in _array(reader, "tokenizer.ggml.scores")]
    types = [int(p[0]) for p in _array(reader, "tokenizer.ggml.token_type")]
    n_vocab, n_ff, n_head = len(tokens), 2 * n_embd, 4
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(MODEL_ALIAS)
    w.add_context_length(context)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id), ("unknown", w.add_unk_token_id)):
        add(int(reader.fields[f"tokenizer.ggml.{key}_token_id"].parts[-1][0]))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    rng = np.random.default_rng(seed)

    def t(name: str, *shape: int, ones: bool = False) -> None:
        data = np.ones(shape, np.float32) if ones else (rng.standard_normal(shape) * 0.02).astype(np.float32)
        w.add_tensor(name, data)

    t("token_embd.weight", n_vocab, n_embd)
    t("output_norm.weight", n_embd, ones=True)
    t("output.weight", n_vocab, n_embd)
    for i in range(n_layer):
        t(f"blk.{i}.attn_norm.weight", n_embd, ones=True)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            t(f"blk.{i}.{name}.weight", n_embd, n_embd)
        t(f"blk.{i}.ffn_norm.weight", n_embd, ones=True)
        t(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        t(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        t(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _array(reader: object, key: str) -> list[np.ndarray]:  # type: ignore[type-arg]
    field = reader.fields[key]  # type: ignore[attr-defined]
    return [field.parts[i] for i in field.data]


@dataclass
class LlamaServer:
    """A running llama-server: its process, base URL and the model name it serves."""

    proc: Proc
    model: str = MODEL_ALIAS

    @property
    def url(self) -> str:
        return self.proc.url


@contextmanager
def run_llama_server(tmp: Path, slots: int = 2, extra: tuple[str, ...] = (), n_embd: int = 64, n_layer: int = 2,
                     slot_context: int = 512) -> Iterator[LlamaServer]:
    """Start llama-server (CPU, --metrics) on a free loopback port with a tiny model; stop it on exit."""
    home = llama_dir()
    model = write_tiny_model(tmp / "tiny-random-llama.gguf", home / "models" / "ggml-vocab-llama-spm.gguf",
                             n_embd=n_embd, n_layer=n_layer, context=max(1024, slot_context))
    port = free_port()
    log = tmp / f"llama-server-{port}.log"
    args = [str(home / "bin" / "llama-server"), "-m", str(model), "--alias", MODEL_ALIAS, "--host", "127.0.0.1",
            "--port", str(port), "--metrics", "-c", str(slot_context * slots), "-np", str(slots), "-t", "1",
            "--no-webui", *extra]
    with log.open("wb") as fh:
        popen = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT)
    proc = Proc(popen, port, log)
    try:
        wait_until(lambda: http_get(f"{proc.url}/health")[0] == 200 or popen.poll() is not None, 120,
                   "llama-server /health")
        if popen.poll() is not None:
            raise AssertionError(f"llama-server exited {popen.returncode}:\n{proc.output()[-4000:]}")
        yield LlamaServer(proc)
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One llama-server for the whole test session (built once, cached under .tools/)."""
    with run_llama_server(tmp_path_factory.mktemp("llama")) as server:
        yield server


CGROUP = Path("/sys/fs/cgroup/cpu/sloguard-e2e-llama")  # cgroup v1 cpu controller, where the machine has one


def weight(pid: int, shares: int = 65536) -> bool:
    """Put a process in a cgroup weighted over the machine's other work; False where that is not possible.

    A test that judges the diagnosis of a fault it injects must see that fault, not a shared machine's ambient load
    starving the engine (a CPU engine's run-queue wait is a cause of its own: `serving_cpu_bound`).
    """
    try:
        CGROUP.mkdir(exist_ok=True)
        (CGROUP / "cpu.shares").write_text(str(shares))
        (CGROUP / "cgroup.procs").write_text(str(pid))
    except OSError:
        return False
    return True
