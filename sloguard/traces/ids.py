"""The probe's span id: an HMAC of its trace id under a per-daemon secret, so no other sender can forge one.

The join gives spans parented on a probe's span id their own orphan lane (traces.join). With an unkeyed hash
anyone who reaches the OTLP port could compute that id for trace ids of their choosing and flood the lane;
with a random 256-bit key drawn at start (never stored, never sent) only the daemon and its probe process,
which gets the key at spawn, can. A restart draws a new key: results in flight then are lost anyway.
"""

from __future__ import annotations

import hmac
import secrets

_key = secrets.token_bytes(32)


def key() -> bytes:
    """Return this process's key (the daemon hands it to the processes that send or read probe span ids)."""
    return _key


def use_key(k: bytes) -> None:
    """Adopt the daemon's key (in the probe and decoder processes, before any id is made)."""
    global _key
    if len(k) < 16:
        raise ValueError("span id key too short")
    _key = bytes(k)


def probe_span_id(trace_id: str) -> str:
    """Return the 16-hex-digit span id sloguard sends in `traceparent` with `trace_id` (its CLIENT span).

    HMAC-SHA256 of the trace id's bytes, cut to 64 bits: as random as a drawn id to anyone without the key;
    the daemon recomputes it from `ProbeResult.trace_id` when it exports the span.
    """
    return hmac.digest(_key, bytes.fromhex(trace_id), "sha256")[:8].hex()
