"""Slack via slack-sdk: bot token (postMessage, then chat.update on resolve) or incoming webhook; Block Kit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from sloguard import escape
from sloguard.alerts.engine import Alert
from sloguard.alerts.notifiers.base import (
    TRANSIENT,
    DeliveryError,
    Ref,
    Sleep,
    fit,
    http_error,
    one_line,
    parse_retry_after,
    scrub,
    severity_word,
    title,
    transient,
)
from sloguard.alerts.routing import Notification
from sloguard.clock import Clock
from sloguard.config.notifiers import SlackNotifierSpec

MIN_GAP_PER_CHANNEL = 1.0  # Slack allows about one message per second per channel
MAX_ALERTS_SHOWN = 10  # keeps a message far below Slack's 50-block limit
MAX_OPEN_MESSAGES = 10  # a group's firing messages (group changes, repeats) updated on resolve: the last 10
OPEN = "open"  # ref key: JSON list of [channel, ts] of the group's messages posted since it last resolved
# Web API `error` codes that no retry can fix; anything else (ratelimited, internal_error...) is retried.
PERMANENT = frozenset({
    "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "no_permission",
    "missing_scope", "channel_not_found", "is_archived", "not_in_channel", "msg_too_long", "no_text",
    "invalid_blocks", "invalid_arguments", "message_not_found", "cant_update_message", "edit_window_closed",
    "restricted_action", "team_access_not_granted", "invalid_token", "no_service", "channel_is_archived",
    "action_prohibited", "posting_to_general_channel_denied", "invalid_payload", "user_not_found",
})
EMOJI = {"critical": ":rotating_light:", "page": ":red_circle:", "ticket": ":large_orange_circle:",
         "warning": ":warning:", "info": ":information_source:"}


def default_retry_handlers() -> list[AsyncRetryHandler]:
    """Return slack-sdk's handlers: one in-client retry for connection errors, 429 (Retry-After) and 500/503."""
    return [AsyncConnectionErrorRetryHandler(max_retry_count=1), AsyncRateLimitErrorRetryHandler(max_retry_count=1),
            AsyncServerErrorRetryHandler(max_retry_count=1)]


def _mrkdwn(text: str) -> str:
    """Return alert text for mrkdwn: labels and annotations carry peer strings (model names, engine versions), so
    `<!channel>`, `<@U…>` and `<url|text>` in them stay text (sloguard.escape.slack); our own links are added after."""
    return escape.slack(text)


def _alert_block(a: Alert) -> list[dict[str, Any]]:
    ann, lab = dict(a.annotations), dict(a.labels)
    if "headline" in ann:  # a message rather than an alert (a release report): its text, no alert fields
        return [{"type": "section", "text": {"type": "mrkdwn", "text": _mrkdwn(ann.get("description", ""))[:2900]}}]
    state = "resolved" if a.resolved_at is not None else "firing"
    if a.resolved_at is not None and a.fired_at is not None and a.resolved_at - a.fired_at < 3600:
        state = f"resolved after {a.resolved_at - a.fired_at:.0f} s"
    text = f"*{_mrkdwn(a.name)}* ({state})\n{_mrkdwn(ann.get('summary', ''))}\n{_mrkdwn(ann.get('description', ''))}"
    fields = [f"*Severity*\n{_mrkdwn(lab.get('severity', 'none')).upper()}", f"*Current value*\n{a.value:.4g}"]
    if "slo" in lab:
        fields.append(f"*SLO*\n{_mrkdwn(lab['slo'])}" + (f" ({_mrkdwn(lab['sli'])})" if "sli" in lab else ""))
    if ann.get("objective"):
        fields.append(f"*Objective*\n{float(ann['objective']) * 100:.10g}%")
    block: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text.strip()[:2900]},
                                    "fields": [{"type": "mrkdwn", "text": f} for f in fields]}]
    block.extend(_diagnosis_blocks(ann))
    links = [f"<{ann[k]}|{title}>" for k, title in (("runbook_url", "Runbook"), ("dashboard_url", "Dashboard"))
             if ann.get(k)]
    if links:
        block.append({"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(links)}]})
    return block


def _diagnosis_blocks(ann: dict[str, str]) -> list[dict[str, Any]]:
    """Return the verdict (sloguard.diagnose) as one line plus its evidence, when the alert carries one."""
    if not ann.get("diagnosis"):
        return []
    why = f"*Where / why:* {_mrkdwn(ann['diagnosis'])}"
    if ann.get("burn_rows"):
        why += f"\n*Rows holding:* {_mrkdwn(ann['burn_rows'])}"
    out: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": why[:2900]}}]
    if ann.get("diagnosis_evidence"):
        out.append({"type": "context", "elements": [{"type": "mrkdwn",
                                                      "text": _mrkdwn(ann["diagnosis_evidence"])[:2900]}]})
    return out


def blocks(note: Notification, dashboard_url: str | None = None) -> list[dict[str, Any]]:
    """Return Block Kit blocks: a header, then severity, summary, value vs objective and links per alert."""
    sev = severity_word(note).lower()
    icon = ":white_check_mark:" if note.status == "resolved" else EMOJI.get(sev, ":bell:")
    head = f"{icon} {escape.terminal(title(note))}"  # plain_text: Slack parses no markup there
    out: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": fit(head), "emoji": True}}]
    for a in note.alerts[:MAX_ALERTS_SHOWN]:
        out.extend(_alert_block(a))
    extra = len(note.alerts) - MAX_ALERTS_SHOWN
    tail = [f"…and {extra} more"] if extra > 0 else []
    if dashboard_url:
        tail.append(f"<{dashboard_url}|Dashboard>")
    if tail:
        out.append({"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(tail)}]})
    return out


def api_error(exc: SlackApiError, secrets: Sequence[str | None]) -> DeliveryError:
    """Classify a Web API failure: 429/5xx and unknown error codes retry, PERMANENT codes do not."""
    status = exc.response.status_code
    code = str(exc.response.get("error", "")) if isinstance(exc.response.data, dict) else ""
    headers = {k.lower(): v for k, v in (exc.response.headers or {}).items()}
    raw = headers.get("retry-after")
    after = parse_retry_after(raw[0] if isinstance(raw, list) else raw)
    retryable = status == 429 or status >= 500 or code not in PERMANENT
    return DeliveryError(scrub(f"slack API HTTP {status} error={code or 'none'}", secrets), retryable, after,
                         ambiguous=status >= 500)


def open_messages(ref: Mapping[str, str] | None) -> list[tuple[str, str]]:
    """Return the group's firing messages still to mark resolved, oldest first (a pre-list ref counts as one)."""
    if not ref or "ts" not in ref:
        return []
    if OPEN not in ref:
        return [(ref["channel"], ref["ts"])]
    return [(str(c), str(t)) for c, t in json.loads(ref[OPEN])]


class SlackNotifier:
    """One Slack destination; ≤1 message per second per channel."""

    def __init__(self, spec: SlackNotifierSpec, secret: str | None, clock: Clock,
                 retry_handlers: list[AsyncRetryHandler] | None = None, sleep: Sleep = asyncio.sleep) -> None:
        if not secret:
            raise ValueError(f"notifier {spec.name}: slack needs token_file/token_env or webhook_url_file/_env")
        self.name, self.spec, self.clock, self._sleep = spec.name, spec, clock, sleep
        self._secret = secret
        self.bot = bool(spec.token_file or spec.token_env)
        handlers = default_retry_handlers() if retry_handlers is None else retry_handlers
        self._web = AsyncWebClient(token=secret, base_url=spec.api_url, timeout=10, retry_handlers=handlers)
        self._hook = AsyncWebhookClient(url=secret, timeout=10, retry_handlers=handlers)
        self._last: dict[str, float] = {}

    async def _pace(self, channel: str) -> None:
        last = self._last.get(channel)
        if last is not None:
            wait = MIN_GAP_PER_CHANNEL - (self.clock.monotonic() - last)
            if wait > 0:
                await self._sleep(wait)
        self._last[channel] = self.clock.monotonic()

    async def _bot(self, note: Notification, ref: Mapping[str, str] | None) -> Ref:
        kw: dict[str, Any] = {"text": _mrkdwn(one_line(note)), "blocks": blocks(note, self.spec.dashboard_url)}
        posted = open_messages(ref)
        if note.status == "resolved" and posted:
            for i, (channel, ts) in enumerate(reversed(posted)):
                await self._update(channel, ts, kw, newest=i == 0)
            return {"channel": posted[-1][0], "ts": posted[-1][1], OPEN: "[]"}
        resp = await self._web.chat_postMessage(channel=self.spec.channel or "", **kw)
        new = (str(resp["channel"]), str(resp["ts"]))
        still_open = [*posted, new] if note.status == "firing" else posted
        return {"channel": new[0], "ts": new[1], OPEN: json.dumps(still_open[-MAX_OPEN_MESSAGES:])}

    async def _update(self, channel: str, ts: str, kw: dict[str, Any], newest: bool) -> None:
        """Mark one posted message resolved; an older one that can no longer be edited is skipped."""
        try:
            await self._web.chat_update(channel=channel, ts=ts, **kw)
        except SlackApiError as exc:
            if newest or api_error(exc, [self._secret]).retryable:
                raise

    async def _webhook(self, note: Notification) -> None:
        resp = await self._hook.send(text=_mrkdwn(one_line(note)), blocks=blocks(note, self.spec.dashboard_url))
        err = http_error(resp.status_code, resp.body or "", (resp.headers or {}).get("Retry-After"))
        if err is not None:
            body = (resp.body or "").strip()
            retryable = err.retryable or (body not in PERMANENT and resp.status_code != 400)
            raise DeliveryError(scrub(f"slack webhook {err}", [self._secret]), retryable, err.retry_after,
                                err.ambiguous)

    async def send(self, note: Notification, ref: Mapping[str, str] | None) -> Ref | None:
        """Post (or update on resolve) one message; raise DeliveryError classified for retry."""
        await self._pace(self.spec.channel or "webhook")
        try:
            if self.bot:
                return await self._bot(note, ref)
            await self._webhook(note)
            return None
        except SlackApiError as exc:
            raise api_error(exc, [self._secret]) from None
        except TRANSIENT as exc:
            raise transient(exc, [self._secret]) from None

    async def close(self) -> None:
        """Nothing to release: slack-sdk opens a session per request."""
