"""Before any load: is the target reachable, does it stream tokens, which engine, version and model is it?

One probe request (the workload's first) is sent the way every bench request is; if it fails, the run
stops with that reason and nothing else is sent. The engine comes from the target's `engine` or, for
`auto`, from one scrape of its /metrics; the version from the engine's own endpoint (ENGINE_VERSION);
the model from the config or the first id of `GET /v1/models`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any

import aiohttp

from sloguard import answer, untrusted
from sloguard.bench.behaviour import BEHAVIOURS
from sloguard.bench.workload import IGNORE_EOS, SETTLE_S, WorkloadSpec
from sloguard.config.spec import TargetSpec
from sloguard.model import ProbeResult, ServerView
from sloguard.probes.stream import make_session
from sloguard.sources.base import SourceError
from sloguard.sources.scrape import ScrapeSource
from sloguard.untrusted import Invalid
from sloguard.urls import api_root

# engine -> (path of its version endpoint, JSON key holding the version)
ENGINE_VERSION: dict[str, tuple[str, str]] = {
    "vllm": ("/version", "version"),
    "sglang": ("/get_server_info", "version"),
    "tgi": ("/info", "version"),
    "llamacpp": ("/props", "build_info"),
    "triton": ("/v2", "version"),
}
OPENAI_APIS = ("chat", "completions")
LOOKUP_TIMEOUT_S = 5.0
PREFLIGHT_TRIES = 3


class PreflightError(Exception):
    """The target cannot be benchmarked; the message says why in one line."""


@dataclass(frozen=True, slots=True)
class TargetInfo:
    """What the run records about the target in its header."""

    engine: str
    engine_version: str | None
    model: str
    first: ProbeResult  # the preflight request (not part of any stage)


async def _get_json(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> Any:
    """Return the JSON answer of `url` within the answer limits (sloguard.answer), else None."""
    try:
        async with asyncio.timeout(LOOKUP_TIMEOUT_S), session.get(url, headers={**answer.HEADERS, **headers},
                                                                  allow_redirects=False) as resp:
            return await answer.read_json(resp, what=url.rsplit("/", 1)[-1]) if resp.status == 200 else None
    except Invalid as exc:
        untrusted.reject("bench", exc.reason, str(exc))
        return None
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


async def _engine(target: TargetSpec, api_key: str | None) -> str:
    if target.engine != "auto" or not target.metrics_url:
        return target.engine
    source = ScrapeSource(target, secrets={target.name: api_key} if api_key else None)
    try:
        async with asyncio.timeout(target.scrape_timeout):
            out = await source.collect()
        return out.payload.engine if isinstance(out.payload, ServerView) else "auto"
    except (SourceError, TimeoutError):
        return "auto"
    finally:
        await source.close()


async def lookup(target: TargetSpec, api: str, model: str, api_key: str | None) -> tuple[str, str | None, str]:
    """Return (engine, engine version or None, model) without sending any generation request."""
    engine = await _engine(target, api_key)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = api_root(target.api_url or "")
    version = None
    async with answer.session(LOOKUP_TIMEOUT_S) as session:
        if engine in ENGINE_VERSION:
            path, key = ENGINE_VERSION[engine]
            doc = await _get_json(session, base + path, headers)
            value = doc.get(key) if isinstance(doc, dict) else None
            version = untrusted.text(str(value)) if isinstance(value, str | int | float) else None
        if not model and api in OPENAI_APIS:
            doc = await _get_json(session, base + "/v1/models", headers)
            rows = doc.get("data") if isinstance(doc, dict) else None
            first = rows[0].get("id") if isinstance(rows, list) and rows and isinstance(rows[0], dict) else None
            model = untrusted.text(first) if isinstance(first, str) else ""
    return engine, version, model


async def first_request(workload: WorkloadSpec) -> ProbeResult:
    """Send the workload's first request as a bench request would; raise PreflightError if it cannot work.

    Unreachable, or answered 200 without a token stream: fails at once (it would fail every request). An
    HTTP error or a timeout is tried again, up to PREFLIGHT_TRIES in all, so a server that fails only
    some requests is still benchmarked (and its errors counted per stage).
    """
    req = workload.request(stage=-1, i=0)
    job = workload.job_for(req)
    async with make_session() as session:
        for _ in range(PREFLIGHT_TRIES):
            result = await BEHAVIOURS["normal"](job.api)(session, job, req.prompt)
            timed_out = (result.error or "").startswith("timeout")
            if result.ok or (result.status_code in (None, 200) and not timed_out):
                break
    if not result.ok:
        raise PreflightError(_why(job.url, result))
    return result


def _why(url: str, r: ProbeResult) -> str:
    error = r.error or "failed"
    if error.startswith("timeout"):
        return f"{url} did not answer the streaming request in time ({error}, {PREFLIGHT_TRIES} tries)"
    if r.status_code is None:
        return f"{url} is not reachable: {error}"
    if r.status_code != 200:
        return f"{url} answered the streaming request with {error}"
    return f"{url} did not stream tokens ({error}): is api_url an OpenAI-compatible (or the probe's API) server?"


async def preflight(target: TargetSpec, workload: WorkloadSpec, api_key: str | None,
                    ignore_eos: str = "auto") -> tuple[TargetInfo, WorkloadSpec]:
    """Check the target; return what it is, and the workload with its model and `ignore_eos` decided.

    `ignore_eos`: "on", "off", or "auto" = on where the engine honours it (workload.IGNORE_EOS).
    """
    engine, version, model = await lookup(target, workload.job.api, workload.job.model, api_key)
    auto = workload.job.ignore_eos or IGNORE_EOS.get(engine, False)
    fixed = auto if ignore_eos == "auto" else ignore_eos == "on"
    job = dataclasses.replace(workload.job, model=model, ignore_eos=fixed)
    workload = dataclasses.replace(workload, job=job, settle_s=SETTLE_S.get(engine, 0.0))
    first = await first_request(workload)
    return TargetInfo(engine, version, model, first), workload
