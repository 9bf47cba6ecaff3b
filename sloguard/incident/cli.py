"""`sloguard status [-c FILE | --url DAEMON] [--json]`: every SLO's state and bottleneck verdict from a running daemon.

For the on-call terminal: reads the daemon's `/api/v1/slos` (the same incident model the landing page, the demo
and notifications render) and prints each SLO's lines. Exit 0 when the daemon answered and every SLO is healthy,
1 when any SLO is in breach or over budget or has a firing alert, 2 when the daemon cannot be read.
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

from sloguard.incident import text
from sloguard.urls import with_scheme

DEFAULT_URL = "http://127.0.0.1:9478"
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # /api/v1/slos of a few hundred SLOs is < 1 MiB


def render(doc: Any) -> str:
    """Return the status text: each SLO's lines from the daemon's incident model (sloguard.incident.text)."""
    slos = doc.get("slos", []) if isinstance(doc, dict) else []
    if not slos:
        return "(no SLOs evaluated yet)"
    return text.render(slos)


def troubled(doc: Any) -> bool:
    """Return whether any SLO is in breach, over budget, or has a firing alert (exit 1)."""
    slos = doc.get("slos", []) if isinstance(doc, dict) else []
    views = [s.get("incident") for s in slos if isinstance(s, dict)]
    return any(isinstance(v, dict) and (v.get("state") in ("BREACH", "OVER BUDGET") or v.get("severity"))
               for v in views)


def fetch(url: str, timeout: float = 5.0) -> Any:
    """Return the daemon's /api/v1/slos JSON; basic auth from SLOGUARD_USER / SLOGUARD_PASSWORD if set."""
    req = urllib.request.Request(url.rstrip("/") + "/api/v1/slos")
    user, password = os.environ.get("SLOGUARD_USER"), os.environ.get("SLOGUARD_PASSWORD")
    if user and password:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = resp.read(MAX_ANSWER_BYTES + 1)
    if len(body) > MAX_ANSWER_BYTES:
        raise ValueError(f"answer larger than {MAX_ANSWER_BYTES} bytes")
    return json.loads(body)


def daemon_url(url: str | None, config: str | None) -> str:
    """Return the daemon's base URL: --url (http:// added when it has no scheme), else the config's `listen`."""
    if url:
        return with_scheme(url)
    if config:
        from sloguard.config.load import load_config
        from sloguard.web.listen import local_url

        return local_url(load_config(config).listen)
    return DEFAULT_URL


def main(argv: list[str]) -> int:
    """Print every SLO's state and verdict; exit 0 healthy, 1 some SLO in breach or alerting, 2 daemon unreadable."""
    from sloguard.config.load import ConfigError

    ap = argparse.ArgumentParser(prog="sloguard status", description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--config", metavar="FILE", help="read the daemon's address from this config's `listen`")
    ap.add_argument("--url", help=f"the daemon's base URL (default {DEFAULT_URL}; `127.0.0.1:9478` means "
                    "http://127.0.0.1:9478); basic auth from SLOGUARD_USER and SLOGUARD_PASSWORD")
    ap.add_argument("--json", action="store_true", help="print the /api/v1/slos document with each diagnosis")
    args = ap.parse_args(argv)
    try:
        url = daemon_url(args.url, args.config)
    except ConfigError as exc:
        print(exc.report(args.config), file=sys.stderr)
        return 2
    try:
        doc = fetch(url)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        print(f"sloguard status: cannot read {url.rstrip('/')}/api/v1/slos: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=2, sort_keys=True) if args.json else render(doc))
    return 1 if troubled(doc) else 0
