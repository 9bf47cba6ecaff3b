"""Tell the daemon as each probe's first token arrives, while its stream still runs.

The engine counts a request's prompt tokens and its first token when its prefill ends, sloguard's probes' too; the
diagnosis takes the probes' prefills out of the users' mean prompt (sloguard.diagnose.prompts). A result only comes
back when its stream ends: seconds later, and without the server's prompt-token count (usage comes in the last
chunk) when the probe was cut short. Until then each probe prefill read as a user's 128-token prompt, and most when
it mattered: while long prefills stall decoding, probe streams last longer and time out (the diagnosis benchmark, 2
probes/s beside 1 user/s: ~5 probes in flight of ~25 prefills per 20 s window, more as TPOT rose).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sloguard.probes.events import Events, Sink

# (trace id, the prompt's nominal tokens) -> None; set per probe task by the probe process (contextvars are per task)
Prefilled = Callable[[str, int], None]
PREFILLED: ContextVar[Prefilled | None] = ContextVar("sloguard_prefilled", default=None)


def sink(events: Events, trace_id: str, tokens: int) -> Sink:
    """Return events.feed, calling the task's PREFILLED hook once, after the read that held the first output token.

    The read is stamped before it is fed, so the hook (one attribute test a read until it fires) adds nothing to any
    timestamp. Without a hook (the CLI, tests): events.feed itself.
    """
    hook = PREFILLED.get()
    if hook is None:
        return events.feed
    told = False

    async def feed(t_ns: int, data: bytes) -> str | None:
        nonlocal told
        error = await events.feed(t_ns, data)
        if not told and events.tally.output_seen:
            told = True
            hook(trace_id, tokens)
        return error

    return feed
