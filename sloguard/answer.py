"""Bounded reads of a peer's small HTTP answers (/v1/models, version endpoints, /props, /info, discovery).

An answer is read whole up to a byte limit (the body as sent: no decompression, `Accept-Encoding: identity`,
a compressed answer is refused), then parsed as strict JSON (no NaN, no nesting past Python's parser). Any
violation raises sloguard.untrusted.Invalid; the caller drops that answer and counts it.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from sloguard import untrusted
from sloguard.untrusted import Invalid

MAX_ANSWER_BYTES = 1024 * 1024  # a /v1/models list of ~10,000 models; version answers are < 1 KiB
MAX_MODELS = 1000  # models one server lists (LoRA adapters included)
HEADERS = {"Accept-Encoding": "identity", "Accept": "application/json"}


def session(timeout: float) -> aiohttp.ClientSession:
    """Return a session for answers: bodies as sent (never inflated by aiohttp), a total timeout."""
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout), auto_decompress=False)


async def read_bytes(resp: aiohttp.ClientResponse, limit: int = MAX_ANSWER_BYTES, what: str = "answer") -> bytes:
    """Return the body, at most `limit` bytes; Invalid("too_large") beyond, Invalid("compressed") if encoded."""
    if resp.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity"):
        raise Invalid("compressed", what)
    if (resp.content_length or 0) > limit:
        raise Invalid("too_large", what)
    parts, size = [], 0
    async for data in resp.content.iter_any():
        size += len(data)
        if size > limit:
            raise Invalid("too_large", what)
        parts.append(data)
    return b"".join(parts)


async def read_json(resp: aiohttp.ClientResponse, limit: int = MAX_ANSWER_BYTES, what: str = "answer") -> Any:
    """Return the body parsed as strict JSON (see read_bytes for the limits)."""
    return untrusted.json_doc(await read_bytes(resp, limit, what), what=what)


def model_ids(doc: Any, what: str = "/v1/models") -> list[str]:
    """Return the model ids of an OpenAI model list (each a bounded string); Invalid when it is not one."""
    rows = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise Invalid("not_a_model_list", what)
    untrusted.bounded(rows, limit=MAX_MODELS, what=what)
    ids = (r.get("id") for r in rows if isinstance(r, dict))
    return [untrusted.text(i, what=f"{what} id") for i in ids if isinstance(i, str) and i]
