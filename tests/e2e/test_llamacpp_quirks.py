"""Issue 17's keep-alive quirk against the real llama-server (tests/support/llama.py): it closes the socket right
after every streamed response despite `Keep-Alive`, so back-to-back probes on one session must each find that
out before sending (captured bytes and the EOS quirks: tests/unit/probes/test_probe_captured.py)."""

from __future__ import annotations

import asyncio

import pytest
from support.llama import LlamaServer, llama_server  # noqa: F401  (session fixture)

from sloguard.outcome import outcome
from sloguard.probes.job import ProbeJob
from sloguard.probes.worker import run_once

pytestmark = pytest.mark.e2e


def test_back_to_back_probes_never_reuse_a_closed_connection(llama_server: LlamaServer) -> None:  # noqa: F811
    jobs = [ProbeJob(name=f"p{i}", target="llama", api=api, url=llama_server.url, model=llama_server.model,
                     max_tokens=4, timeout=30.0) for i, api in enumerate(["chat", "completions"] * 4)]
    results = asyncio.run(run_once(jobs))
    assert [(r.ok, r.error) for r in results] == [(True, None)] * len(jobs)
    for r in results:  # usage counts every generated token; an answer ending on EOS counts it too
        assert outcome(r) in ("success", "empty") and r.output_tokens is not None and 1 <= r.output_tokens <= 4
        assert r.e2e_s is not None and (r.ttft_s is None or r.e2e_s >= r.ttft_s)
