"""Judge a replayed recording against the fault it recorded (pure): right cause, false causes, verdict lag.

- right: the first cause other than none/unknown named from the fault's start to its end is the expected one;
- lag: evaluations from the first breached evaluation after the fault started to the first right verdict (0: at
  the breach itself); None when never right;
- held: of the breached evaluations from the first right verdict to the fault's end, the share naming it;
- false causes: evaluations naming a cause before the fault (or anywhere in a healthy recording), and, in a
  faulted one, evaluations naming another cause after the first right one while the fault lasts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sloguard.recording.replay import Step

UNNAMED = ("none", "unknown")


@dataclass(frozen=True)
class Judged:
    """One recording's score."""

    name: str
    expected: str
    first: str  # first cause named in the fault ("" if none), or the first false cause of a healthy recording
    right: bool
    lag: int | None
    held: float | None
    false: int  # evaluations naming a cause that is not the fault's
    evaluations: int
    breached_at: float | None  # seconds after the fault's start

    @property
    def incident(self) -> bool:
        """Return True for a faulted recording whose SLO breached while the fault lasted (a fault that never
        breached is no incident: its verdict stays none, rightly)."""
        return self.expected not in ("none", "unknown") and self.breached_at is not None


def judge(name: str, steps: Sequence[Step], marks: Sequence[Mapping[str, Any]], expected: str) -> Judged:
    """Return the score of one SLO's replayed steps (`marks`: the recording's fault marks)."""
    start = next((float(m["t"]) for m in marks if m.get("phase") == "start"), None)
    end = next((float(m["t"]) for m in marks if m.get("phase") == "end"), None)
    if start is None or expected == "none":  # healthy (a faulted recording without its marks is never right)
        named = [s for s in steps if s.verdict.cause not in UNNAMED]
        return Judged(name, expected, named[0].verdict.cause if named else "", not named and expected == "none",
                      None, None, len(named), len(steps), None)
    stop = end if end is not None else steps[-1].t if steps else start
    before = [s for s in steps if s.t < start and s.verdict.cause not in UNNAMED]
    during = [s for s in steps if start <= s.t <= stop]
    named = [s for s in during if s.verdict.cause not in UNNAMED]
    first = named[0].verdict.cause if named else ""
    breach = next((i for i, s in enumerate(during) if s.breached), None)
    right_at = next((i for i, s in enumerate(during) if s.verdict.cause == expected), None)
    lag = None if right_at is None or breach is None else max(0, right_at - breach)
    held = None
    wrong = 0
    if right_at is not None:
        after = [s for s in during[right_at:] if s.breached]
        held = sum(s.verdict.cause == expected for s in after) / len(after) if after else 1.0
        wrong = sum(s.verdict.cause not in (*UNNAMED, expected) for s in during[right_at:])
    breached_at = during[breach].t - start if breach is not None else None
    return Judged(name, expected, first, first == expected, lag, held, len(before) + wrong, len(steps), breached_at)
