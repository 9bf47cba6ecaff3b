"""`sloguard status [--url DAEMON] [--json]`: every SLO's state and bottleneck verdict from a running daemon.

For the on-call terminal: reads the daemon's `/api/v1/slos` (the same document the landing page and the demo
render) and prints each SLO's lines plus its verdict and evidence. Exit 0 when the daemon answered and every
SLO is healthy, 1 when any SLO has a verdict other than none, 2 when the daemon cannot be read.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

from sloguard.slo.status import render_status

DEFAULT_URL = "http://127.0.0.1:9478"


def verdict_lines(slo: dict[str, Any]) -> list[str]:
    """Return what follows an SLO's status lines: the verdict's evidence, or why there is no verdict line."""
    d = slo.get("diagnosis")
    if not isinstance(d, dict):
        return ["  diagnosis: not available (diagnose.enabled: false, or not evaluated yet)"]
    if d.get("cause") == "none":
        return [f"  diagnosis: none (no objective breached over the last {d.get('window', '?')})"]
    return [f"    - {e}" for e in d.get("evidence_text") or []]


def render(doc: Any) -> str:
    """Return the status text: each SLO's lines (the verdict line among them), then the verdict's evidence."""
    slos = doc.get("slos", []) if isinstance(doc, dict) else []
    if not slos:
        return "(no SLOs evaluated yet)"
    out = []
    for slo in slos:
        out += render_status({"slos": [slo]}).splitlines() + verdict_lines(slo)
    return "\n".join(out)


def fetch(url: str, timeout: float = 5.0) -> Any:
    """Return the daemon's /api/v1/slos JSON; basic auth from SLOGUARD_USER / SLOGUARD_PASSWORD if set."""
    req = urllib.request.Request(url.rstrip("/") + "/api/v1/slos")
    user, password = os.environ.get("SLOGUARD_USER"), os.environ.get("SLOGUARD_PASSWORD")
    if user and password:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def main(argv: list[str]) -> int:
    """Print every SLO's state and verdict; exit 0 healthy, 1 some SLO breached, 2 daemon unreadable."""
    ap = argparse.ArgumentParser(prog="sloguard status", description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=DEFAULT_URL, help=f"the daemon's base URL (default {DEFAULT_URL}); basic "
                    "auth from SLOGUARD_USER and SLOGUARD_PASSWORD")
    ap.add_argument("--json", action="store_true", help="print the /api/v1/slos document with each diagnosis")
    args = ap.parse_args(argv)
    try:
        doc = fetch(args.url)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        print(f"sloguard status: cannot read {args.url}/api/v1/slos: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=2, sort_keys=True) if args.json else render(doc))
    slos = doc.get("slos", []) if isinstance(doc, dict) else []
    breached = any(isinstance(s.get("diagnosis"), dict) and s["diagnosis"].get("cause") != "none" for s in slos)
    return 1 if breached else 0
