"""The `notifiers:` section: one model per notifier type, told apart by `type`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from sloguard.config.strict import Name, PositiveDuration, SecretSource, Strict
from sloguard.config.units import Duration


class NotifierBase(Strict):
    name: Name
    match: dict[str, list[str]] = Field(default_factory=dict)
    # One group per SLO, SLI and severity: a second SLO's page never waits behind the first one's group.
    group_by: list[str] = Field(default_factory=lambda: ["alertname", "slo", "sli", "severity"])
    group_wait: Duration = Field(default=30.0, ge=0)
    group_interval: PositiveDuration = 300.0
    repeat_interval: PositiveDuration = 4 * 3600.0
    send_resolved: bool = True
    max_delivery_age: PositiveDuration = 86400.0


class SlackNotifierSpec(NotifierBase, SecretSource):
    type: Literal["slack"]
    token_file: str | None = None
    token_env: str | None = None
    webhook_url_file: str | None = None
    webhook_url_env: str | None = None
    channel: str | None = None
    api_url: str = Field(default="https://slack.com/api/", pattern=r"^https?://.+")
    dashboard_url: str | None = None


class AlertmanagerNotifierSpec(NotifierBase, SecretSource):
    type: Literal["alertmanager"]
    url: str = Field(pattern=r"^https?://.+")
    password_file: str | None = None
    password_env: str | None = None
    username: str | None = None
    resend_interval: PositiveDuration = 60.0
    resolved_resend_for: PositiveDuration = 300.0


class WebhookNotifierSpec(NotifierBase, SecretSource):
    type: Literal["webhook"]
    url: str | None = Field(default=None, pattern=r"^https?://.+")
    url_with_secret_file: str | None = None
    url_with_secret_env: str | None = None
    timeout: PositiveDuration = 10.0


class LogNotifierSpec(NotifierBase):
    type: Literal["log", "console"]
    group_wait: Duration = Field(default=0.0, ge=0)


NotifierSpec = Annotated[
    SlackNotifierSpec | AlertmanagerNotifierSpec | WebhookNotifierSpec | LogNotifierSpec,
    Field(discriminator="type"),
]
