"""The bench workload: which request the i-th send of a stage is (seeded, the same in every run).

Request i of every stage has the same size (prompt tokens from the probe's weighted mix, or dataset row
perm[i]) and max_tokens, so stages and runs are comparable; the probe-style random nonce that leads each
synthetic prompt also depends on the stage and on a salt drawn per run (`salt`; "" with --same-prompts), so no
prompt repeats within a run or across runs of the same seed and prefix caches cannot hit (a second run with the
same prompts on the same llama-server prefilled 1 token for 182 of 182 requests). Dataset prompts are sent as
they are (a repeated row may hit a prefix cache, as in production: the bench warns when a stage was served from
the cache).
Output length is fixed by `ignore_eos` on engines that accept it (IGNORE_EOS), else left to the model.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from dataclasses import dataclass

from sloguard.bench.dataset import estimate_tokens
from sloguard.probes.connection import SETTLE_S as CONNECTION_SETTLE_S
from sloguard.probes.job import ProbeJob, default_max_events
from sloguard.probes.workload import Prompt, bucket_for, filler

# engine -> how long a connection must have been idle before the bench reuses it. llama.cpp's server closes
# each connection right after its response (sloguard.probes.connection): wait for its FIN as the probes do.
# The others keep connections alive, and a load generator must reuse them as real clients do: a new
# connection per request is extra server work, and at hundreds of requests/s it runs out of local ports.
SETTLE_S: dict[str, float] = {"llamacpp": CONNECTION_SETTLE_S}
# engine -> whether its OpenAI-compatible server honours `ignore_eos` (a vLLM extension also in SGLang,
# llama.cpp's server and TensorRT-LLM's trtllm-serve); TGI and Triton have no such switch.
IGNORE_EOS: dict[str, bool] = {
    "vllm": True, "sglang": True, "llamacpp": True, "trtllm": True, "tgi": False, "triton": False, "openai": False,
}


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request to send: its index in the stage, prompt, output cap and behaviour."""

    seq: int
    prompt: Prompt
    max_tokens: int
    behaviour: str = "normal"


@dataclass(frozen=True)
class WorkloadSpec:
    """Everything a worker process needs to rebuild any request of any stage (picklable)."""

    job: ProbeJob
    seed: int
    rows: tuple[tuple[str, int], ...] = ()  # dataset rows (prompt, max_tokens or 0); empty: the probe's mix
    behaviours: tuple[tuple[str, float], ...] = (("normal", 1.0),)
    settle_s: float = 0.0  # reuse a pooled connection idle at least this long (SETTLE_S)
    salt: str = ""  # leads every synthetic prompt's nonce: drawn per run, "" to replay the same prompts

    def request(self, stage: int, i: int) -> RequestSpec:
        """Return request `i` of `stage` (deterministic in seed, stage and i)."""
        size_rng = random.Random(f"{self.seed}/{i}")
        stage_rng = random.Random(f"{self.seed}/{stage}/{i}")
        behaviour = self._behaviour(size_rng)
        if self.rows:
            text, max_tokens = self.rows[_row_index(self.seed, i, len(self.rows))]
            tokens = estimate_tokens(text)
            prompt = Prompt(text, tokens, bucket_for(tokens, self.job.prompt_buckets))
            return RequestSpec(i, prompt, max_tokens or self.job.max_tokens, behaviour)
        sizes = [t for t, _ in self.job.prompts]
        tokens = size_rng.choices(sizes, weights=[w for _, w in self.job.prompts], k=1)[0]
        nonce = f"{self.salt}{stage_rng.getrandbits(32):08x}"
        prompt = Prompt(filler(tokens, nonce), tokens, bucket_for(tokens, self.job.prompt_buckets))
        return RequestSpec(i, prompt, self.job.max_tokens, behaviour)

    def job_for(self, req: RequestSpec) -> ProbeJob:
        """Return the probe job that sends `req` (the workload's job with the request's max_tokens)."""
        if req.max_tokens == self.job.max_tokens:
            return self.job
        return with_max_tokens(self.job, req.max_tokens)

    def _behaviour(self, rng: random.Random) -> str:
        if len(self.behaviours) == 1:
            return self.behaviours[0][0]
        return rng.choices([b for b, _ in self.behaviours], weights=[w for _, w in self.behaviours], k=1)[0]


def with_max_tokens(job: ProbeJob, max_tokens: int) -> ProbeJob:
    """Return the job with another output cap; its event-flood cap grows with it (never shrinks)."""
    return dataclasses.replace(job, max_tokens=max_tokens,
                               max_events=max(job.max_events, default_max_events(max_tokens)))


def _row_index(seed: int, i: int, n: int) -> int:
    """Return the dataset row of request i: a seeded permutation of the rows, repeated when exhausted."""
    rnd, pos = divmod(i, n)
    return _order(seed, rnd, n)[pos]


@functools.lru_cache(maxsize=4)
def _order(seed: int, rnd: int, n: int) -> tuple[int, ...]:
    order = list(range(n))
    random.Random(f"{seed}/rows/{rnd}").shuffle(order)
    return tuple(order)
