"""How one bench request behaves: the BEHAVIOURS table (name -> how to send it), the extension point.

Every request of a stage carries a behaviour drawn (seeded) from the workload's mix; summaries give
latency figures over `normal` requests only, so an unhappy-path behaviour shows its effect on the
well-behaved requests' latency, and counts per behaviour. Only `normal` exists today; planned entries
(issue 19): a client that disconnects after k tokens, an oversized prompt past the context length, a
slow reader. Each is a function with the `Send` signature plus one row here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp

from sloguard.model import ProbeResult
from sloguard.probes import PROBES
from sloguard.probes.job import ProbeJob
from sloguard.probes.workload import Prompt

Send = Callable[[aiohttp.ClientSession, ProbeJob, Prompt], Awaitable[ProbeResult]]


def normal(api: str) -> Send:
    """Send the request exactly as the daemon's probe of that API does, and read it to the end."""
    return PROBES[api]


# behaviour name -> (api -> how to send one request)
BEHAVIOURS: dict[str, Callable[[str], Send]] = {
    "normal": normal,
}
