"""The probe's span id follows from its trace id, so a result needs no extra field to export its span."""

from __future__ import annotations

import hashlib


def probe_span_id(trace_id: str) -> str:
    """Return the 16-hex-digit span id sloguard sends in `traceparent` with `trace_id` (its CLIENT span).

    A keyed hash of the random trace id: as random as a drawn id, never all zero in practice, and the
    daemon recomputes it from `ProbeResult.trace_id` when it exports the span.
    """
    return hashlib.blake2b(bytes.fromhex(trace_id), digest_size=8, person=b"sloguard-probe").hexdigest()
