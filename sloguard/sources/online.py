"""Look at every target over the network once: is /metrics an engine page, and does /v1/models serve the probes' models?

Used by `sloguard check --online` (printed, exit 1 on a problem) and by the daemon's first run (logged as
warnings), so a probe against a model the server does not serve is named at start-up instead of failing every
request with HTTP 404.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from sloguard import answer, untrusted
from sloguard.config.spec import Config, TargetSpec
from sloguard.sources.base import SourceError
from sloguard.sources.scrape import ScrapeSource
from sloguard.untrusted import Invalid
from sloguard.urls import api_endpoint

log = logging.getLogger("sloguard.online")
OPENAI_APIS = ("chat", "completions")


@dataclass(frozen=True, slots=True)
class Finding:
    """One line about one target: `ok` False for a problem a user must fix."""

    ok: bool
    text: str


async def served_models(api_url: str, api_key: str | None, timeout: float = 5.0) -> list[str]:
    """Return the model ids `GET {api_url}/v1/models` lists; raise SourceError when it cannot be read."""
    headers = {**answer.HEADERS, **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    url = api_endpoint(api_url, "/v1/models")
    try:
        async with answer.session(timeout) as session, session.get(url, headers=headers, allow_redirects=False) as resp:
            if resp.status != 200:
                raise SourceError("http_status", f"{url} answered HTTP {resp.status}")
            return answer.model_ids(await answer.read_json(resp, what="/v1/models"))
    except Invalid as exc:
        untrusted.reject("discovery", exc.reason, str(exc))
        raise SourceError(exc.reason, f"{url} is not a usable OpenAI model list ({exc.reason})") from None
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise SourceError("connect", f"cannot read {url}: {type(exc).__name__}") from None


def wanted_models(cfg: Config) -> dict[str, set[str]]:
    """Return {target name: models its OpenAI-API probes send}."""
    targets = {t.name: t for t in cfg.targets}
    out: dict[str, set[str]] = {}
    for p in cfg.probes:
        target = targets.get(p.target)
        model = p.model or (target.model if target else None)
        if target is not None and target.api_url and p.api in OPENAI_APIS and model:
            out.setdefault(p.target, set()).add(model)
    return out


async def check_target(target: TargetSpec, models: set[str], api_key: str | None,
                       metrics: bool = True) -> list[Finding]:
    """Return the findings about one target: its engine from /metrics (if `metrics`), models from /v1/models."""
    name, found = f"target {target.name}", []
    engine = ""
    if target.metrics_url and metrics:
        source = ScrapeSource(target, secrets={target.name: api_key} if api_key else None)
        try:
            async with asyncio.timeout(target.scrape_timeout):
                out = await source.collect()
            engine = f"{getattr(out.payload, 'engine', target.engine)} engine"
        except SourceError as exc:
            found.append(Finding(False, f"{name}: /metrics {exc.reason}: {exc}"))
        except TimeoutError:
            found.append(Finding(False, f"{name}: /metrics timeout after {target.scrape_timeout:g}s"))
        finally:
            await source.close()
    if models and target.api_url:
        try:
            served = await served_models(target.api_url, api_key)
        except SourceError as exc:
            return [*found, Finding(False, f"{name}: {exc}")]
        listed = ", ".join(served) or "nothing"
        found += [Finding(False, f"{name}: model {m} not served (served: {listed})") for m in sorted(models)
                  if m not in served]
        if all(m in served for m in models):
            found.append(Finding(True, f"{name}: {engine + ', ' if engine else ''}serves {listed}"))
    elif engine and not found:
        found.append(Finding(True, f"{name}: {engine}"))
    return found


async def check_targets(cfg: Config, api_keys: Mapping[str, str], metrics: bool = True) -> list[Finding]:
    """Check every target concurrently; findings in config order."""
    wanted = wanted_models(cfg)
    results = await asyncio.gather(*(check_target(t, wanted.get(t.name, set()), api_keys.get(t.name), metrics)
                                     for t in cfg.targets))
    return [f for per in results for f in per]


async def log_findings(cfg: Config, api_keys: Mapping[str, str]) -> None:
    """Log each model problem once as a warning (the daemon's first run; /metrics has its own reports)."""
    try:
        findings = await check_targets(cfg, api_keys, metrics=False)
    except Exception:  # a start-up hint must never take the daemon down
        log.debug("target check failed", exc_info=True)
        return
    for f in findings:
        if not f.ok:
            log.warning(f.text)
