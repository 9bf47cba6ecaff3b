"""A target's release identity, read from the server rather than typed: engine, engine version, served models.

The `identity` source asks each target with an `api_url` every `reports.identity_interval`: the engine's
version endpoint (VERSION_ENDPOINTS) and `/v1/models`. A request that fails says nothing (the previous
value stays), so a restarting server is not a release; an engine without a version endpoint has none.
User labels (`targets[].labels`) come from the config. The release id is a digest of all of it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp

from sloguard import answer, untrusted
from sloguard.sources.base import SourceOutput
from sloguard.untrusted import Invalid
from sloguard.urls import api_root

# engine -> (path under the API base URL, JSON key of the version string)
VERSION_ENDPOINTS: dict[str, tuple[str, str]] = {
    "vllm": ("/version", "version"),
    "sglang": ("/get_server_info", "version"),
    "tgi": ("/info", "version"),
    "llamacpp": ("/props", "build_info"),
    "triton": ("/v2", "version"),
}
UNSEEN = object()
MODELS_CHARS = 256  # of the served models as a label value (sloguard_release_info{model})


@dataclass(frozen=True)
class Identity:
    """Who served a probe: target, engine, engine version (None: not exposed), served models, user labels."""

    target: str
    engine: str = ""
    engine_version: str | None = None
    model: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def release_id(self) -> str:
        """Return a 16-hex-digit digest of the identity (what probe results are stamped with)."""
        return hashlib.sha256(json.dumps(self.as_json(), sort_keys=True).encode()).hexdigest()[:16]

    def as_json(self) -> dict[str, Any]:
        """Return the identity as JSON."""
        return {"target": self.target, "engine": self.engine, "engine_version": self.engine_version,
                "model": self.model, "labels": dict(sorted(self.labels.items()))}

    def describe(self) -> str:
        """Return e.g. 'release=v0.11, vllm 0.11.0, model m' for messages."""
        parts = [f"{k}={v}" for k, v in sorted(self.labels.items())]
        parts.append(" ".join(x for x in (self.engine, self.engine_version or "") if x))
        if self.model:
            parts.append(f"model {self.model}")
        return ", ".join(p for p in parts if p)


@dataclass(frozen=True)
class Observed:
    """What one identity collection saw; UNSEEN where a request failed (keep the previous value)."""

    target: str
    engine_version: object = UNSEEN
    models: object = UNSEEN


def merge(current: Identity, seen: Observed) -> Identity:
    """Return the identity updated with what was seen (failed requests leave their field as it was)."""
    out = current
    if seen.engine_version is not UNSEEN:
        out = replace(out, engine_version=seen.engine_version if isinstance(seen.engine_version, str) else None)
    if isinstance(seen.models, list) and seen.models:
        out = replace(out, model=models_text([str(m) for m in seen.models]))
    return out


def models_text(models: list[str]) -> str:
    """Return the served models as one label value of at most MODELS_CHARS: all of them comma-joined, or the
    first ones, how many more, and a digest of the whole list (so the release id still sees every model)."""
    ids = sorted(models)
    joined = ",".join(ids)
    if len(joined) <= MODELS_CHARS:
        return joined
    digest = hashlib.sha256(joined.encode()).hexdigest()[:8]
    shown: list[str] = []
    for m in ids:
        if len(",".join([*shown, m])) > MODELS_CHARS - 32:
            break
        shown.append(m)
    return f"{','.join(shown)} (+{len(ids) - len(shown)} more, {digest})"


async def _get(session: aiohttp.ClientSession, url: str, headers: dict[str, str], what: str) -> tuple[bool, Any]:
    """Return (answered, JSON body or None): a 404 is an answer (no such endpoint), an error is not; an answer
    over the limits (sloguard.answer) is counted in sloguard_invalid_input_total{source="identity"}."""
    try:
        async with session.get(url, headers={**answer.HEADERS, **headers}, allow_redirects=False) as resp:
            if resp.status == 404:
                return True, None
            if resp.status != 200:
                return False, None
            return True, await answer.read_json(resp, what=what)
    except Invalid as exc:
        untrusted.reject("identity", exc.reason, str(exc))
        return False, None
    except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
        return False, None


class IdentitySource:
    """One target's identity reader, scheduled like every source (sloguard_source_up{source="identity"}).

    Under `engine: auto` it tries each engine's version endpoint in turn and keeps the first that answers.
    """

    kind = "identity"

    def __init__(self, target: str, api_url: str, engine: str, api_key: str | None, interval: float) -> None:
        self.target, self.interval, self.timeout = target, interval, 10.0
        self._base = api_root(api_url)
        self._engines = [engine] if engine in VERSION_ENDPOINTS else list(VERSION_ENDPOINTS) if engine == "auto" else []
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._session: aiohttp.ClientSession | None = None

    async def _version(self, session: aiohttp.ClientSession) -> object:
        if not self._engines:
            return None  # an engine without a version endpoint: none, and that is final
        unanswered = False
        for engine in self._engines:
            path, key = VERSION_ENDPOINTS[engine]
            answered, body = await _get(session, self._base + path, self._headers, path)
            value = body.get(key) if isinstance(body, dict) else None
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                self._engines = [engine]  # found it: ask only this one from now on
                return untrusted.text(str(value), what=f"{path} {key}")
            unanswered = unanswered or not answered
        return UNSEEN if unanswered else None

    async def collect(self) -> SourceOutput:
        """Read the version endpoint and /v1/models once."""
        if self._session is None:
            self._session = answer.session(self.timeout / 2)
        version = await self._version(self._session)
        answered, body = await _get(self._session, self._base + "/v1/models", self._headers, "/v1/models")
        models: object = UNSEEN
        if answered and isinstance(body, dict):
            try:
                models = answer.model_ids(body)
            except Invalid as exc:
                untrusted.reject("identity", exc.reason, str(exc))
        if version is UNSEEN and models is UNSEEN:
            from sloguard.sources.base import SourceError

            raise SourceError("unreachable", f"target {self.target}: neither the version endpoint nor /v1/models "
                              "answered")
        return SourceOutput(payload=Observed(self.target, version, models))

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None
