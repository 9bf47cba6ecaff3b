#!/usr/bin/env bash
# Set everything up (scripts/setup.sh), then lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$(pwd)/.tools/bin:$PATH"
.venv/bin/ruff check sloguard tests benchmarks
.venv/bin/mypy sloguard
.venv/bin/lint-imports  # the layering contract in pyproject.toml ([tool.importlinter])
# Four test files at a time (each file's tests stay in one worker, so module fixtures start once): the e2e
# tests mostly wait on real processes, so 4 workers on 2 cores cut ~25 min to ~7. `-n 0` runs serially.
# --no-loadscope-reorder: xdist would hand out the files with the most tests first, and the longest files
# (tests/conftest.py's order) last, where they ran alone on an idle machine at the end.
exec .venv/bin/python -m pytest -n "${SLOGUARD_TEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder "$@"
