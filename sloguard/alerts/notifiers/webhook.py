"""Generic webhook: JSON in Alertmanager's webhook payload shape (version 4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sloguard.alerts.notifiers.base import Ref, alert_json, post_json
from sloguard.alerts.routing import Notification
from sloguard.clock import Clock
from sloguard.config.notifiers import WebhookNotifierSpec


def _common(dicts: list[dict[str, str]]) -> dict[str, str]:
    if not dicts:
        return {}
    return {k: v for k, v in dicts[0].items() if all(d.get(k) == v for d in dicts[1:])}


def payload(note: Notification, receiver: str) -> dict[str, Any]:
    """Return the Alertmanager webhook body for a notification."""
    alerts = [alert_json(a) for a in note.alerts]
    return {"version": "4", "groupKey": note.group_key, "truncatedAlerts": 0, "status": note.status,
            "receiver": receiver, "groupLabels": dict(note.group_labels),
            "commonLabels": _common([a["labels"] for a in alerts]),
            "commonAnnotations": _common([a["annotations"] for a in alerts]), "externalURL": "", "alerts": alerts}


class WebhookNotifier:
    """POST JSON to a URL (plain `url`, or a secret URL from url_with_secret_file/_env)."""

    def __init__(self, spec: WebhookNotifierSpec, secret: str | None, clock: Clock) -> None:
        url = secret or spec.url
        if not url:
            raise ValueError(f"notifier {spec.name}: webhook needs url or url_with_secret_file/_env")
        self.name, self.spec, self._url, self._secret = spec.name, spec, url, secret

    async def send(self, note: Notification, ref: Mapping[str, str] | None) -> Ref | None:
        """POST the payload; raise DeliveryError classified for retry."""
        await post_json(self._url, payload(note, self.name), "webhook", [self._secret], self.spec.timeout)
        return None

    async def close(self) -> None:
        """Nothing to release: one session per request."""
