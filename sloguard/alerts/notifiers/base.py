"""What every notifier shares: the protocol, the error that classifies retries, secret-free messages."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import aiohttp

from sloguard import escape
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
            "annotations": {k: escape.lines(v) for k, v in a.annotations},  # peer text: no control bytes
            "startsAt": iso(a.fired_at or a.active_at),
            "endsAt": iso(end) if end is not None else "0001-01-01T00:00:00Z", "fingerprint": a.fingerprint}


TITLE_MAX = 150  # Slack's header block limit: a title is built to fit, never cut mid-word


def fit(text: str, limit: int = TITLE_MAX) -> str:
    """Return text within `limit` characters, cut at a word boundary with an ellipsis only if it must be."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return cut + "…"


def severity_word(note: Notification) -> str:
    """Return what the message is: RESOLVED, or the most severe firing alert's severity (PAGE, TICKET, ...)."""
    if note.status == "resolved":
        return "RESOLVED"
    order = ("critical", "page", "ticket", "warning", "info")
    sevs = [dict(a.labels).get("severity", "") for a in note.alerts if a.resolved_at is None]
    return (min(sevs, key=lambda s: order.index(s) if s in order else len(order), default="") or "firing").upper()


def title(note: Notification) -> str:
    """Return a complete one-line title: `PAGE: SLO chat latency budget burning 62.9x (+1 more)`, ≤ TITLE_MAX."""
    headline = next((dict(a.annotations).get("headline") for a in note.alerts), None)
    if headline:
        return fit(headline)
    first = note.alerts[0] if note.alerts else None
    if first is None:
        return severity_word(note)
    labels, ann = dict(first.labels), dict(first.annotations)
    name = ann.get("title") or " ".join(x for x in (first.name, labels.get("slo", ""), labels.get("target", "")) if x)
    more = f" (+{len(note.alerts) - 1} more)" if len(note.alerts) > 1 else ""
    return fit(f"{severity_word(note)}: {fit(name, TITLE_MAX - 24)}{more}")


def one_line(note: Notification) -> str:
    """Return a plain-text summary of a notification (fallback text, logs): the title and the first summary.

    A message that is not an alert (a release report) carries its own `headline` annotation.
    """
    headline = next((dict(a.annotations).get("headline") for a in note.alerts), None)
    if headline:
        return headline
    summary = next((dict(a.annotations).get("summary", "") for a in note.alerts), "")
    return f"{title(note)} — {summary}" if summary else title(note)


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
