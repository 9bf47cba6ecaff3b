"""Shared e2e fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.procs import PATIENCE
from support.slack_double import TOKEN_ENV, SlackDouble

# pytest-timeout's limit per test (its module fixtures' setup included) is a hang guard like every wait here, so
# it scales the same way: 300 s × PATIENCE. At 300 s flat it cut fixtures short whose own waits allow 540 s
# (the diagnosis rig at load 30) and ~95 CLI starts at load 30 (the no-traceback cases), failing 102 tests.
HANG_GUARD_S = 300.0 * PATIENCE


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every e2e test without a timeout of its own the scaled hang guard."""
    for item in items:
        if item.get_closest_marker("e2e") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(HANG_GUARD_S))


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlackDouble]:
    """Run the Slack-like server; the daemon reads its token from $SLOGUARD_E2E_SLACK_TOKEN."""
    with SlackDouble() as d:
        monkeypatch.setenv(TOKEN_ENV, d.token)
        yield d
