"""Run the README demo as written and inject every fault it advertises, one after another.

    .venv/bin/python benchmarks/demo_faults.py [--only load_multiplier,cpu_burn] [--patience 420]

Starts `sloguard demo` (the same command scripts/demo.sh runs) piped, waits until it says the baselines are
learned, then for each fault of `sloguard.demo.FAULTS`: injects it with the exact curl payload the demo prints,
waits until the SLO pages in the console notifier's log and the status names a cause, cures it, and waits
until the SLO is OK again. Prints one row per fault: time to page, time to the named cause, the cause named,
whether it is the one the demo advertises, the console's page line. Figures depend on the machine's load: the
table says the load average at each fault.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sloguard.demo import FAULTS, free_port  # noqa: E402


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def _send(url: str, method: str, body: bytes | None = None) -> None:
    req = urllib.request.Request(url, data=body, method=method)
    with urllib.request.urlopen(req, timeout=30):
        pass


def _view(base: str) -> dict[str, Any]:
    slos = _get(f"{base}/api/v1/slos")["slos"]
    return next(s["incident"] for s in slos if s["name"] == "sim-chat-latency" and s.get("incident"))


def _views(base: str) -> list[dict[str, Any]]:
    return [s["incident"] for s in _get(f"{base}/api/v1/slos")["slos"] if s.get("incident")]


def _named(views: list[dict[str, Any]], cause: str) -> str | None:
    """Return the cause an SLO's why names (the advertised one first), None while none is named."""
    named = [c for v in views for c in (
        "failures by kind" if str(v["why"].get("text", "")).startswith("failures over ") else None,
        v["why"].get("cause") if v["why"]["kind"] == "verdict" and v["why"].get("cause") not in ("unknown", "none")
        else None) if c]
    return cause if cause in named else (named[0] if named else None)


def _until_page_and_cause(base: str, log: Path, cause: str, patience: float) -> tuple[float | None, float | None,
                                                                                       str | None]:
    """Poll from the injection: when any demo SLO's page reaches the console, when the advertised cause is named."""
    pages_before, start = log.read_text().count("PAGE: SLO "), time.monotonic()
    t_page = t_cause = None
    named: str | None = None
    while time.monotonic() - start < patience and (t_page is None or t_cause is None):
        if t_page is None and log.read_text().count("PAGE: SLO ") > pages_before:
            t_page = time.monotonic() - start
        with contextlib.suppress(OSError, ValueError, KeyError):
            named = _named(_views(base), cause) or named
        if t_cause is None and named == cause:
            t_cause = time.monotonic() - start
        time.sleep(1)
    return t_page, t_cause, named


def _wait(check: Any, patience: float) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < patience:
        try:
            if check():
                return time.monotonic() - start
        except (OSError, ValueError, StopIteration, KeyError):
            pass
        time.sleep(2)
    return None


def _s(t: float | None) -> str:
    return "-" if t is None else f"{t:.0f} s"


def main(argv: list[str]) -> int:
    """Run the demo, inject each fault, print the table; exit 1 if a fault got no page or not its cause."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated fault keys (default: every advertised fault)")
    ap.add_argument("--patience", type=float, default=420.0, help="seconds to wait for a page and a cause")
    args = ap.parse_args(argv)
    chosen = [f for f in FAULTS if not args.only or f[0] in args.only.split(",")]
    sim_port, listen = free_port(), f"127.0.0.1:{free_port()}"
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"demo-faults-{os.getpid()}.log"
    with log.open("w") as out:
        demo = subprocess.Popen([sys.executable, "-m", "sloguard", "demo", "--sim-port", str(sim_port), "--listen",
                                 listen, "--duration", "3h"], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    base, sim = f"http://{listen}", f"http://127.0.0.1:{sim_port}"
    rows, failed, started = [], False, time.monotonic()
    try:
        learned = _wait(lambda: _view(base)["why"]["kind"] not in ("learning", "off"), 900)
        print(f"baselines learned {learned and learned:.0f} s after start (log: {log})", flush=True)
        for key, value, cause in chosen:
            load = os.getloadavg()[0]
            _send(f"{sim}/sim/faults", "POST", json.dumps({key: json.loads(value)}).encode())
            t_page, t_cause, named = _until_page_and_cause(base, log, cause, args.patience)
            right = named == cause
            line = next((ln for ln in reversed(log.read_text().splitlines()) if "PAGE: SLO" in ln), "")
            _send(f"{sim}/sim/faults", "DELETE")
            _wait(lambda: all(v["state"] == "OK" and v["severity"] != "page" for v in _views(base)), 900)
            failed |= t_page is None or t_cause is None
            rows.append((key, t_page, t_cause, named, cause, right, load, re.sub(r"^.*?msg=", "", line)[:90]))
            print(rows[-1], flush=True)
    finally:
        demo.terminate()
        demo.wait(30)
    print(f"\nfault | time to page | time to cause | named | advertised | right | load | console page line "
          f"({time.monotonic() - started:.0f} s in all)")
    for key, tp, tc, named, cause, right, load, line in rows:
        print(f"{key} | {_s(tp)} | {_s(tc)} | {named} | {cause} | {'yes' if right else 'NO'} | {load:.1f} | {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
