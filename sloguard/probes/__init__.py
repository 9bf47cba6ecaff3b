"""Synthetic streaming probes: the PROBES table (api name -> probe coroutine) and the job type."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp

from sloguard.model import ProbeResult
from sloguard.probes.job import ProbeJob, jobs_from_config
from sloguard.probes.openai import chat, completions
from sloguard.probes.tgi import tgi
from sloguard.probes.triton import triton
from sloguard.probes.workload import Prompt

ProbeFn = Callable[[aiohttp.ClientSession, ProbeJob, Prompt], Awaitable[ProbeResult]]

PROBES: dict[str, ProbeFn] = {
    "chat": chat,
    "completions": completions,
    "tgi": tgi,
    "triton": triton,
}

__all__ = ["PROBES", "ProbeFn", "ProbeJob", "Prompt", "jobs_from_config"]
