"""How one bench request behaves: the BEHAVIOURS table (name -> how to send it), the extension point.

Every request of a stage carries a behaviour drawn (seeded) from the workload's mix; summaries give
latency figures over `normal` requests only (and judge only them), so an unhappy-path behaviour shows its
effect on the well-behaved requests' latency, next to its own figures per behaviour. The unhappy paths
(sloguard.bench.unhappy): `disconnect@K` (hang up after K tokens), `oversized` (a prompt over the context
length), `slow_reader@R` (read R tokens/s). A behaviour is a function with the `Send` signature plus one
row here; a parameter follows `@` in its name (`disconnect@16`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping

import aiohttp

from sloguard.bench import unhappy
from sloguard.model import ProbeResult
from sloguard.probes import PROBES
from sloguard.probes.job import ProbeJob
from sloguard.probes.workload import Prompt

Send = Callable[[aiohttp.ClientSession, ProbeJob, Prompt], Awaitable[ProbeResult]]


def normal(api: str) -> Send:
    """Send the request exactly as the daemon's probe of that API does, and read it to the end."""
    return PROBES[api]


def _oversized(api: str) -> Send:
    return unhappy.oversized


def _with(param: float, run: Callable[..., Awaitable[ProbeResult]]) -> Send:
    async def send(session: aiohttp.ClientSession, job: ProbeJob, prompt: Prompt) -> ProbeResult:
        return await run(session, job, prompt, param)
    return send


# behaviour name -> (api, parameter or None -> how to send one request)
TABLE: dict[str, Callable[[str, float | None], Send]] = {
    "normal": lambda api, _: normal(api),
    "disconnect": lambda api, k: _with(int(k or unhappy.DEFAULTS["disconnect"]), unhappy.disconnect),
    "oversized": lambda api, _: _oversized(api),
    "slow_reader": lambda api, r: _with(r or unhappy.DEFAULTS["slow_reader"], unhappy.slow_reader),
}
PARAMETRISED = frozenset({"disconnect", "slow_reader"})


def parse(name: str) -> tuple[str, float | None]:
    """Return (behaviour, parameter) of `disconnect@8`; ValueError for an unknown name or a bad parameter."""
    base, at, param = name.partition("@")
    if base not in TABLE:
        raise ValueError(f"unknown behaviour {base!r}: use {', '.join(TABLE)}")
    if not at:
        return base, None
    if base not in PARAMETRISED:
        raise ValueError(f"behaviour {base!r} takes no @parameter")
    try:
        value = float(param)
    except ValueError:
        raise ValueError(f"behaviour {name!r}: the parameter must be a number") from None
    if value <= 0:
        raise ValueError(f"behaviour {name!r}: the parameter must be > 0")
    return base, value


class Behaviours(Mapping[str, Callable[[str], Send]]):
    """The behaviours by full name (`slow_reader@5` included): what a worker looks a request's behaviour up in."""

    def __getitem__(self, name: str) -> Callable[[str], Send]:
        try:
            base, param = parse(name)
        except ValueError:
            raise KeyError(name) from None
        return lambda api: TABLE[base](api, param)

    def __iter__(self) -> Iterator[str]:
        return iter(TABLE)

    def __len__(self) -> int:
        return len(TABLE)


BEHAVIOURS: Mapping[str, Callable[[str], Send]] = Behaviours()
