#!/usr/bin/env bash
# Run the whole test suite N times (default 1) beside a CPU hog that alone keeps 2 x the cores runnable (load
# average >= 2 x cores), and print a table: failures per run, duration, the load average seen. The suite command
# is scripts/test.sh's, without setup and lint; arguments after N go to pytest (e.g. `3 tests/e2e`).
# The hog is Debian's stress-ng (installed here if missing and apt-get can), else a Python burner. It is bounded:
# stopped when the suite stops (normal end, failure, Ctrl-C, SIGTERM), within 2 s of this script being killed
# outright (SIGKILL), and after SLOGUARD_HOG_LIMIT_S (default 3600 s per run) in any case.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(pwd)/.tools/bin:$PATH"

runs=${1:-1}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [N] [pytest args...]" >&2; exit 2; }
shift || true
cores=$(nproc)
hogs=$((2 * cores))
limit=${SLOGUARD_HOG_LIMIT_S:-3600}
out=$(mktemp -d "${TMPDIR:-/tmp}/sloguard-under-load.XXXXXX")
hog_pids=()
sampler_pid=""

stop_hog() {
    local pid
    for pid in "${hog_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${hog_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    hog_pids=()
    if [[ -n "$sampler_pid" ]]; then kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; fi
    sampler_pid=""
}
trap stop_hog EXIT
trap 'echo "interrupted: the hog is stopped; logs in $out" >&2; exit 130' INT TERM

if ! command -v stress-ng >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing stress-ng (apt-get)" >&2
    apt-get install -y -qq stress-ng >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && \
        apt-get install -y -qq stress-ng >/dev/null 2>&1; } || echo "no stress-ng: using the Python burner" >&2
fi

start_hog() {
    if command -v stress-ng >/dev/null; then
        stress-ng --cpu "$hogs" --timeout "${limit}s" --quiet >/dev/null 2>&1 &
        local hog=$!
        hog_pids+=("$hog")
        # and should this script be killed outright (no trap runs), a watcher stops it within 2 s
        ( while kill -0 $$ 2>/dev/null && kill -0 "$hog" 2>/dev/null; do sleep 2; done; kill "$hog" 2>/dev/null ) &
        hog_pids+=($!)
    else
        local i
        for ((i = 0; i < hogs; i++)); do
            python3 -c '
import os, sys, time
parent, end = os.getppid(), time.monotonic() + float(sys.argv[1])
while time.monotonic() < end and os.getppid() == parent:  # orphaned (the script was killed): stop
    for _ in range(100_000):
        pass
' "$limit" &
            hog_pids+=($!)
        done
    fi
}

sample_load() {  # the 1-minute load average every 10 s, while the run (and this script) lasts
    while kill -0 $$ 2>/dev/null; do cut -d' ' -f1 /proc/loadavg >>"$1"; sleep 10; done
}

for ((run = 1; run <= runs; run++)); do
    log="$out/run-$run.log"
    start_hog
    sleep 30  # the load average (1 min) climbs towards the hog's level before the suite starts
    sample_load "$out/load-$run.txt" &
    sampler_pid=$!
    echo "run $run/$runs: $(cut -d' ' -f1-3 /proc/loadavg) load, hog ${hogs} x $(command -v stress-ng >/dev/null \
        && echo stress-ng || echo python); log $log" >&2
    started=$(date +%s)
    set +e
    .venv/bin/python -m pytest -n "${SLOGUARD_TEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder -p no:cacheprovider \
        --junitxml="$out/run-$run.xml" "$@" >"$log" 2>&1
    echo "$? $(( $(date +%s) - started ))" >"$out/rc-$run.txt"
    set -e
    stop_hog
done

python3 - "$out" "$runs" "$cores" <<'EOF'
import statistics, sys, xml.etree.ElementTree as ET
from pathlib import Path

out, runs, cores = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(f"\n{runs} run(s) beside a CPU hog of {2 * cores} workers on {cores} cores; logs in {out}")
print(f"{'run':>3}  {'exit':>4}  {'passed':>6}  {'failed':>6}  {'errors':>6}  {'skipped':>7}  {'minutes':>7}  "
      "load 1m min/mean/max")
failures = []
for run in range(1, runs + 1):
    rc, seconds = (Path(out, f"rc-{run}.txt").read_text().split() + ["?", "0"])[:2]
    loads = [float(x) for x in Path(out, f"load-{run}.txt").read_text().split()] if Path(out, f"load-{run}.txt").exists() else []
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    xml = Path(out, f"run-{run}.xml")
    if xml.exists():
        for suite in ET.parse(xml).getroot().iter("testsuite"):
            for k in counts:
                counts[k] += int(suite.get(k, 0))
            for case in suite.iter("testcase"):
                bad = case.find("failure") if case.find("failure") is not None else case.find("error")
                if bad is not None:
                    name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
                    failures.append((run, name, (bad.get("message") or "").splitlines()[0][:160] if bad.get("message") else ""))
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    load = f"{min(loads):.1f}/{statistics.mean(loads):.1f}/{max(loads):.1f}" if loads else "-"
    print(f"{run:>3}  {rc:>4}  {passed:>6}  {counts['failures']:>6}  {counts['errors']:>6}  {counts['skipped']:>7}  "
          f"{int(seconds) / 60:>7.1f}  {load}")
for run, name, message in failures:
    print(f"run {run}: {name}: {message}")
EOF
