#!/usr/bin/env bash
# Set up a runtime virtualenv and run the demo: simulator + daemon + live SLO status in the terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/sloguard ] || scripts/setup.sh --runtime-only
exec .venv/bin/sloguard demo "$@"
