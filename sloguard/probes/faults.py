"""How a probe names a failed request: transport faults, redirect targets, and no secret in any message."""

from __future__ import annotations

import errno
import re
from urllib.parse import urlsplit

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from sloguard.probes.arrival import Arrivals

EVENT_STREAM = "text/event-stream"
_USERINFO = re.compile(r"//[^/@\s]+@")


async def head_error(resp: aiohttp.ClientResponse) -> str | None:
    """Return why a response head is not a stream to read (redirect, HTTP error, content type), else None."""
    if 300 <= resp.status < 400:
        return f"redirect {resp.status} to {safe_location(resp.headers.get('Location', ''))}"
    if resp.status != 200:
        text = (await resp.content.read(512)).decode("utf-8", "replace")
        return f"http {resp.status}: {text.strip()}"
    mime = resp.headers.get("Content-Type", "").partition(";")[0].strip().lower()
    if mime != EVENT_STREAM:
        return f"not an event stream ({mime or 'no content type'})"
    return None


def safe_location(location: str) -> str:
    """Return a redirect target without credentials, query or fragment (they may carry secrets)."""
    parts = urlsplit(location)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    origin = f"{parts.scheme}://{host}" if parts.scheme else ""
    cut = " (query removed)" if parts.query else ""
    return f"{origin}{parts.path}{cut}" or "(no Location)"


def describe(exc: BaseException, log: Arrivals | None) -> str:
    """Name a transport fault: a reset with the bytes received, a protocol error, or the exception."""
    if was_reset(log) or getattr(exc, "errno", None) == errno.ECONNRESET:
        return reset_error(log)
    parser = _cause(exc, HttpProcessingError)
    if parser is not None:
        return f"protocol error: {str(parser.message).splitlines()[0].rstrip(':') if parser.message else parser}"
    return f"{type(exc).__name__}: {exc}"


def was_reset(log: Arrivals | None) -> bool:
    return log is not None and isinstance(log.lost, ConnectionResetError)


def reset_error(log: Arrivals | None) -> str:
    return f"connection reset after {log.body_bytes if log is not None else 0} bytes"


def _cause(exc: BaseException, kind: type[HttpProcessingError]) -> HttpProcessingError | None:
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__
    return None


def redact(error: str | None, api_key: str | None) -> str | None:
    """Strip URL credentials and the API key from an error message; cap it at 300 characters."""
    if error is None:
        return None
    error = _USERINFO.sub("//***@", error)
    if api_key:
        error = error.replace(api_key, "***")
    return error[:300]

