#!/usr/bin/env bash
# Set up a runtime virtualenv (quietly; its log in .cache/setup-demo.log) and run the demo: simulator + daemon +
# live SLO status in the terminal. Arguments go to `sloguard demo` (--duration 10m, --sim-port 8001, --listen ...).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/sloguard ]; then
  mkdir -p .cache
  echo "[demo] installing sloguard into .venv (a minute or two; log: .cache/setup-demo.log)" >&2
  scripts/setup.sh --runtime-only > .cache/setup-demo.log 2>&1 || {
    tail -n 30 .cache/setup-demo.log >&2
    echo "[demo] setup failed; the full log is .cache/setup-demo.log" >&2
    exit 1
  }
fi
exec .venv/bin/sloguard demo "$@"
