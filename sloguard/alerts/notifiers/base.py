"""What every notifier shares: the protocol, the error that classifies retries, secret-free messages."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import aiohttp

from sloguard.alerts.engine import Alert
from sloguard.alerts.routing import Notification
from sloguard.log import REDACTED

Ref = dict[str, str]
Sleep = Callable[[float], Awaitable[None]]
# Errors that mean "the receiver was not reached or did not answer": always worth another try.
TRANSIENT = (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, OSError)
# Of those, the ones raised before any byte of the request left: no duplicate is possible after them.
NOT_SENT = (aiohttp.ClientConnectorError, ConnectionRefusedError, aiohttp.InvalidURL)


class DeliveryError(Exception):
    """A failed delivery: `retryable` decides retry vs dead letter; the message never holds a secret.

    `ambiguous`: the receiver may have got (and acted on) the request anyway (a timeout or a disconnect
    after sending, a 5xx), so a later successful retry is counted as a possible duplicate.
    """

    def __init__(self, message: str, retryable: bool, retry_after: float | None = None,
                 ambiguous: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.ambiguous = ambiguous


class Notifier(Protocol):
    name: str

    async def send(self, note: Notification, ref: Mapping[str, str] | None) -> Ref | None:
        """Deliver one notification; return a message reference to keep for the group, or raise DeliveryError."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """Return text with every secret value replaced by <redacted>."""
    for s in secrets:
        if s:
            text = text.replace(s, REDACTED)
    return text


def transient(exc: BaseException, secrets: Iterable[str | None]) -> DeliveryError:
    """Return a retryable error naming the exception type, secrets scrubbed (URLs can carry tokens).

    Only a failure to connect proves the request was never sent; anything else is ambiguous.
    """
    sent = not isinstance(exc, NOT_SENT)
    return DeliveryError(scrub(f"{type(exc).__name__}: {exc}", secrets)[:300], retryable=True, ambiguous=sent)


def parse_retry_after(value: str | None) -> float | None:
    """Return a Retry-After header's seconds (delta-seconds form), None if absent or unparsable."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def http_error(status: int, body: str, retry_after: str | None) -> DeliveryError | None:
    """Classify an HTTP status: None for 2xx, retryable for 408/429/5xx, permanent for other 4xx."""
    if 200 <= status < 300:
        return None
    retryable = status in (408, 429) or status >= 500
    return DeliveryError(f"HTTP {status}: {body[:200]}", retryable, parse_retry_after(retry_after), status >= 500)


def iso(ts: float) -> str:
    """Return an RFC 3339 UTC timestamp."""
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def alert_json(a: Alert, ends_at: float | None = None) -> dict[str, Any]:
    """Return an alert in Alertmanager's shape (labels, annotations, startsAt, endsAt, status, fingerprint)."""
    end = a.resolved_at if a.resolved_at is not None else ends_at
    return {"status": "resolved" if a.resolved_at is not None else "firing", "labels": dict(a.labels),
            "annotations": dict(a.annotations), "startsAt": iso(a.fired_at or a.active_at),
            "endsAt": iso(end) if end is not None else "0001-01-01T00:00:00Z", "fingerprint": a.fingerprint}


def one_line(note: Notification) -> str:
    """Return a short plain-text summary of a notification (fallback text, logs).

    A message that is not an alert (a release report) carries its own `headline` annotation.
    """
    headline = next((dict(a.annotations).get("headline") for a in note.alerts), None)
    if headline:
        return headline
    names = sorted({a.name for a in note.alerts})
    firing = sum(a.resolved_at is None for a in note.alerts)
    head = f"[{note.status.upper()}:{firing}]" if note.status == "firing" else "[RESOLVED]"
    summary = next((dict(a.annotations).get("summary", "") for a in note.alerts), "")
    return f"{head} {', '.join(names)} {summary}".strip()


def basic_auth(user: str, password: str) -> dict[str, str]:
    """Return the Authorization header for HTTP basic auth."""
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def post_json(url: str, body: Any, what: str, secrets: Iterable[str | None], timeout: float = 10.0,
                    headers: Mapping[str, str] | None = None) -> None:
    """POST JSON; raise DeliveryError (retryable for connection errors, 408, 429 and 5xx), secrets scrubbed."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s, \
                s.post(url, json=body, headers=headers) as resp:
            err = http_error(resp.status, await resp.text(), resp.headers.get("Retry-After"))
    except TRANSIENT as exc:
        raise transient(exc, secrets) from None
    if err is not None:
        raise DeliveryError(scrub(f"{what} {err}", secrets), err.retryable, err.retry_after, err.ambiguous)
