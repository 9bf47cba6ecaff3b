"""Synthetic streaming probes: the PROBES table (api or check kind -> probe coroutine) and the job type."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp

from sloguard.model import ProbeResult
from sloguard.probes.abort import abort
from sloguard.probes.job import ProbeJob, jobs_from_config
from sloguard.probes.openai import chat, completions
from sloguard.probes.oversized import oversized_prompt
from sloguard.probes.tgi import tgi
from sloguard.probes.triton import triton
from sloguard.probes.workload import Prompt

ProbeFn = Callable[[aiohttp.ClientSession, ProbeJob, Prompt], Awaitable[ProbeResult]]

PROBES: dict[str, ProbeFn] = {
    "chat": chat,
    "completions": completions,
    "tgi": tgi,
    "triton": triton,
    # guardrail checks (ProbeJob.kind), sloguard.guardrails
    "abort": abort,
    "oversized_prompt": oversized_prompt,
}

__all__ = ["PROBES", "ProbeFn", "ProbeJob", "Prompt", "jobs_from_config"]
