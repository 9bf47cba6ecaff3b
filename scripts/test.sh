#!/usr/bin/env bash
# Set everything up (scripts/setup.sh), then lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$(pwd)/.tools/bin:$PATH"
.venv/bin/ruff check sloguard tests benchmarks
.venv/bin/mypy sloguard
exec .venv/bin/python -m pytest "$@"
