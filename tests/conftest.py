"""Suite-wide collection order: the longest files first, so that xdist (`--dist loadfile --no-loadscope-reorder`,
which hands files to workers in collection order) does not start them last and make the suite's wall time their
length plus the rest (without the flag xdist orders the files by their number of tests, which undoes this)."""

from __future__ import annotations

import pytest

# Files of several minutes each (their rigs wait on real processes): tests/incidents ~7-10 min, the flood 5 min,
# llama-server's long prompts ~4 min.
LONGEST_FIRST = ("tests/incidents/", "tests/e2e/test_flood_isolation.py", "tests/e2e/test_llamacpp_diagnosis.py",
                 "tests/e2e/test_diagnosis_e2e.py", "tests/e2e/test_install.py", "tests/e2e/test_bench_sim.py",
                 "tests/e2e/test_slo_budgets_e2e.py", "tests/e2e/test_image.py", "tests/e2e/test_guardrails_sim.py",
                 "tests/e2e/test_alerting_equivalence.py", "tests/e2e/test_no_traceback.py",
                 "tests/e2e/test_alerting_slack_e2e.py")


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::")[0]
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if path.startswith(prefix)), len(LONGEST_FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: the order within a file and among the rest is kept
