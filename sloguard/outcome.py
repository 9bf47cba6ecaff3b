"""Probe outcomes: the `outcome` label of `sloguard_probe_requests_total`, derived from a result's fields.

Failed requests name their outcome by the first word of their error, so a stored result (the store keeps the
error text) gives the same outcome after a restart. Every error message the probes build for these outcomes
starts with the prefix below; keep them in step.
"""

from __future__ import annotations

from sloguard.model import ProbeResult

SUCCESS, EMPTY, ERROR = "success", "empty", "error"
TIMEOUT, REDIRECT, EVENT_FLOOD = "timeout", "redirect", "event_flood"
# error prefix -> outcome; anything else that failed is ERROR
PREFIXES: tuple[tuple[str, str], ...] = (("timeout", TIMEOUT), ("redirect", REDIRECT), ("event flood", EVENT_FLOOD))
OUTCOMES = (SUCCESS, EMPTY, TIMEOUT, REDIRECT, EVENT_FLOOD, ERROR)


def outcome(r: ProbeResult) -> str:
    """Return the result's outcome: success, empty (only an end-of-sequence token), or a failure kind."""
    if r.ok:
        return EMPTY if r.ttft_s is None else SUCCESS
    error = r.error or ""
    return next((name for prefix, name in PREFIXES if error.startswith(prefix)), ERROR)


def failure_kind(r: ProbeResult) -> str:
    """Return what a failed request met, as a person names it: timeout, HTTP 503, reset, refused, event flood, error."""
    kind = outcome(r)
    error = (r.error or "").lower()
    if kind != ERROR:
        return kind.replace("_", " ")
    if r.status_code is not None and r.status_code >= 400:
        return f"HTTP {r.status_code}"
    for word, name in (("reset", "connection reset"), ("refused", "connection refused"), ("protocol", "protocol error"),
                       ("malformed", "malformed stream"), ("crashed", "probe crashed")):
        if word in error:
            return name
    return ERROR
