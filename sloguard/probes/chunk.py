"""One stream event as an API module decodes it (Chunk), and the error event every API shares."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sloguard.traces.record import ServerRecord


@dataclass(frozen=True, slots=True)
class Chunk:
    """What one stream event says, decoded by an API module; everything optional (add new fields at the end)."""

    content: bool = False  # carries >= 1 generated non-reasoning token
    reasoning: bool = False  # carries >= 1 generated reasoning token
    tokens: int | None = None  # token count, only where the event states it (token_ids, logprobs, TGI)
    output_tokens: int | None = None  # server-reported generated tokens (usage, details, timings)
    prompt_tokens: int | None = None
    error: str | None = None
    done: bool = False  # a terminator the API defines ([DONE], finish_reason, final details)
    chars: int = 0  # generated text length, to share out a server token total over uneven chunks
    record: ServerRecord | None = None  # the server's own timings of the request, in-band (sloguard.traces)
    step: bool = False  # a generation step without text (empty delta, finish chunk): may carry a token
    finish: str = ""  # finish_reason as sent ("stop", "length", ...), "" when none

    @property
    def bearing(self) -> bool:
        """Return True if the event carries generated text (content or reasoning)."""
        return self.content or self.reasoning


def error_text(obj: dict[str, Any]) -> str | None:
    """Return the message of an `{"error": ...}` or `{"object": "error"}` event, else None."""
    if obj.get("object") == "error":
        return str(obj.get("message", "error"))[:200]
    err = obj.get("error")
    if err is None:
        return None
    if isinstance(err, dict):
        return str(err.get("message") or json.dumps(err))[:200]
    return str(err)[:200]
