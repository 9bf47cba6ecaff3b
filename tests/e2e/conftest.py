"""Shared e2e fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.slack_double import TOKEN_ENV, SlackDouble


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlackDouble]:
    """Run the Slack-like server; the daemon reads its token from $SLOGUARD_E2E_SLACK_TOKEN."""
    with SlackDouble() as d:
        monkeypatch.setenv(TOKEN_ENV, d.token)
        yield d
