"""Log/console notifier: one structured log line per notification (the demo's default)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sloguard.alerts.notifiers.base import Ref, one_line
from sloguard.alerts.routing import Notification
from sloguard.clock import Clock
from sloguard.config.notifiers import LogNotifierSpec

log = logging.getLogger("sloguard.alerts.notify")


class LogNotifier:
    """Never fails: writes firing notifications at WARNING, resolved ones at INFO."""

    def __init__(self, spec: LogNotifierSpec, secret: str | None, clock: Clock) -> None:
        self.name = spec.name

    async def send(self, note: Notification, ref: Mapping[str, str] | None) -> Ref | None:
        """Log the notification."""
        level = logging.WARNING if note.status == "firing" else logging.INFO
        log.log(level, one_line(note), extra={
            "notifier": self.name, "status": note.status, "group": note.group_key,
            "alerts": ";".join(",".join(f"{k}={v}" for k, v in a.labels) for a in note.alerts)})
        return None

    async def close(self) -> None:
        """Nothing to release."""
