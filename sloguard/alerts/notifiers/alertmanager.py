"""Alertmanager: `POST /api/v2/alerts`; firing alerts carry endsAt ahead, resolved ones their end time."""

from __future__ import annotations

from collections.abc import Mapping

from sloguard.alerts.notifiers.base import Ref, alert_json, basic_auth, post_json
from sloguard.alerts.routing import Notification
from sloguard.clock import Clock
from sloguard.config.notifiers import AlertmanagerNotifierSpec

ENDS_AHEAD = 4  # firing alerts end this many resend intervals ahead unless re-sent (Prometheus uses 4× too)


class AlertmanagerNotifier:
    """One Alertmanager; routing re-sends firing alerts every `resend_interval` and resolved ones for a while."""

    def __init__(self, spec: AlertmanagerNotifierSpec, secret: str | None, clock: Clock) -> None:
        self.name, self.spec, self.clock = spec.name, spec, clock
        self._secret = secret
        self._headers = basic_auth(spec.username or "", secret) if secret is not None else None
        self._url = spec.url.rstrip("/") + "/api/v2/alerts"

    async def send(self, note: Notification, ref: Mapping[str, str] | None) -> Ref | None:
        """POST every alert of the notification; raise DeliveryError classified for retry."""
        ends = self.clock.now() + ENDS_AHEAD * self.spec.resend_interval
        body = [alert_json(a, ends) for a in note.alerts]
        for a in body:
            del a["status"], a["fingerprint"]  # not part of the v2 postable alert
        await post_json(self._url, body, "alertmanager", [self._secret], headers=self._headers)
        return None

    async def close(self) -> None:
        """Nothing to release: one session per request."""
