"""The NOTIFIERS table: config `type` -> factory(spec, secret, clock) -> Notifier."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sloguard.alerts.notifiers.alertmanager import AlertmanagerNotifier
from sloguard.alerts.notifiers.base import DeliveryError, Notifier
from sloguard.alerts.notifiers.log import LogNotifier
from sloguard.alerts.notifiers.slack import SlackNotifier
from sloguard.alerts.notifiers.webhook import WebhookNotifier
from sloguard.clock import Clock

Factory = Callable[[Any, str | None, Clock], Notifier]

NOTIFIERS: dict[str, Factory] = {
    "slack": SlackNotifier,
    "alertmanager": AlertmanagerNotifier,
    "webhook": WebhookNotifier,
    "log": LogNotifier,
    "console": LogNotifier,
}

__all__ = ["NOTIFIERS", "DeliveryError", "Notifier"]
