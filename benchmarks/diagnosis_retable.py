"""Re-decide the runs of benchmarks/diagnosis.py --trace files through the current RULES table, in seconds.

A real-time seed set takes ~45 min (~28 min with the 60 s warm-up before 2026-11-28); a change to the rule table (a
threshold, a guard, a precedence) needs its effect on every recorded run, the healthy ones included. Each traced
poll holds the signals with their baselines, the located stage and the breach the daemon saw; this replays them, one
distinct evaluation at a time (a poll every half interval shows most evaluations twice), through `engine.apply` and
the confirmation's rule (a cause held at 2 of the last 3 evaluations, state rows counted breach or not, a published
cause kept while its row holds, an event row's and a sure row's named at once; sloguard.diagnose.confirm). What it
cannot replay: a change to a signal's computation, to where a stage is located, or to which baselines count (a
trace records the baselines the daemon used: traces of the 60 s warm-up, before prompt baselines needed 100 of the
users' prefills, hold prompt baselines today's daemon would have withheld at injection); those need the real-time
benchmark.

`--mean-prompt-baselines` replays traces recorded before f595f1d, whose users' prompt baselines were the median of
their healthy values, as today's daemon learns them (their mean, prompts.MEAN_BASELINES): it replays both from the
trace's own healthy evaluations (Baselines, the benchmark's 10 min horizon and window) and scales each recorded
baseline by mean ÷ median, so what the replay cannot know (values before the trace, which baselines were withheld)
stays as recorded.

Per trace it prints right cause, no false cause and verdict − breach within two evaluations, the runs whose
first cause differs from the one the daemon published, and the late ones. The lag counts distinct evaluations
from the first poll after injection on which the explained objective missed to the first right verdict: it
matches the benchmark's own `lag_of` within one interval (it merges evaluations whose polls read the same), and
its "within two" count matched all five recorded seed sets of 2026-11-28 exactly.

Run: .venv/bin/python benchmarks/diagnosis_retable.py TRACE.json [TRACE.json ...]   (~15 s a seed set)
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sloguard.diagnose.confirm import EVENTS, UNNAMED, K, N
from sloguard.diagnose.engine import apply
from sloguard.diagnose.history import Baselines
from sloguard.diagnose.model import Inputs
from sloguard.diagnose.prompts import MEAN_BASELINES
from sloguard.diagnose.rules import RULES, CauseRule

Poll = dict[str, Any]


def distinct(trace: Sequence[Poll]) -> Iterator[tuple[int, Poll]]:
    """Yield (index, poll) for the first poll of each evaluation (later polls of it read the same).

    An evaluation is told by its time (`at`, the status's `evaluated_at`); traces written before it was recorded
    by what the poll read (two evaluations that read exactly the same then count as one).
    """
    last = None
    for i, poll in enumerate(trace):
        key = poll.get("at") or json.dumps([poll["signals"], poll["stage"], poll["breach"], poll["objectives"]],
                                           sort_keys=True)
        if key != last:
            last = key
            yield i, poll


def mean_prompt_baselines(trace: Sequence[Poll], horizon: float = 600.0, window: float = 20.0) -> list[Poll]:
    """Return the trace with each recorded prompt baseline × (mean ÷ median) of the healthy values seen before it."""
    median = Baselines(horizon, min_span=window)
    mean = Baselines(horizon, min_span=window, means=MEAN_BASELINES)
    firsts = dict(distinct(trace))
    out = copy.deepcopy(list(trace))
    evaluation = 0
    for i, poll in enumerate(out):
        evaluation = i if i in firsts else evaluation
        poll.setdefault("at", f"#{evaluation}")  # the evaluations of the recorded trace, whatever the baselines read
        for key in MEAN_BASELINES:
            got = poll["signals"].get(key)
            if got is not None and got.get("baseline") is not None and (m := median.get(key)) and (a := mean.get(key)):
                got["baseline"] *= a / m
        if i in firsts and poll["breach"] is None:  # the daemon learns at healthy evaluations
            values = {k: v["value"] for k in MEAN_BASELINES
                      if (v := trace[i]["signals"].get(k)) is not None and v.get("value") is not None}
            median.record(poll["t"], values)
            mean.record(poll["t"], values)
    return out


def held(poll: Poll, rules: Iterable[CauseRule]) -> tuple[set[str], list[str], set[str]]:
    """Return (state causes whose rows hold, breach or not; causes that can explain the poll's breach; causes a
    `sure` row names now)."""
    sig = {k: v["value"] for k, v in poll["signals"].items() if v.get("value") is not None}
    base = {k: v["baseline"] for k, v in poll["signals"].items() if v.get("baseline") is not None}
    inp = Inputs("s", 0.0, 0.0, (), {}, sig, base)
    state: set[str] = set()
    sure: set[str] = set()
    cands: list[str] = []
    for rule in rules:
        if not apply(rule, inp)[0]:
            continue
        if rule.unlocated or rule.state:
            state.add(rule.cause)
        if rule.sure:
            sure.add(rule.cause)
        stage = poll["stage"]
        if poll["breach"] is not None and (stage in rule.stages or (stage == "none" and rule.unlocated)):
            cands.append(rule.cause)
    return state, list(dict.fromkeys(cands)), sure


def decide(trace: Sequence[Poll], rules: Sequence[CauseRule] = RULES) -> list[str]:
    """Return the published cause at every poll (polls of one evaluation repeat its cause)."""
    out: list[str] = []
    history: list[set[str]] = []
    published = ""
    firsts = dict(distinct(trace))
    for i, poll in enumerate(trace):
        if i not in firsts:
            out.append(out[-1] if out else "none")
            continue
        state, cands, sure = held(poll, rules)
        history = [*history, state | set(cands)][-N:]
        if poll["breach"] is None:
            published = ""
            out.append("none")
            continue
        pick = next((c for c in cands if c == published or c in EVENTS or c in sure
                     or sum(c in h for h in history) >= K), "")
        published = pick
        out.append(pick or "unknown")
    return out


def _missing(poll: Poll, metric: str) -> bool:
    objectives = poll["objectives"]
    shortest = min((o[1] for o in objectives), key=_seconds, default=None)
    return any(o[0] == metric and o[1] == shortest and o[2] is False for o in objectives)


def _seconds(window: str) -> float:
    return float(window[:-1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[window[-1]]


def lag(run: dict[str, Any], causes: Sequence[str]) -> int | str | None:
    """Return right verdict − breach of the objective it explains in evaluations; 'pre' if it missed already."""
    trace: list[Poll] = run["trace"]
    at = next((i for i, (p, c) in enumerate(zip(trace, causes, strict=True)) if p["t"] >= 0
               and c == run["expected"]), None)
    if at is None or run["expected"] == "none":
        return None
    metric = trace[at]["breach"]
    before = [p for p in trace if p["t"] < 0]
    if before and _missing(before[-1], metric):
        return "pre"
    start = next((i for i, p in enumerate(trace) if p["t"] >= 0 and _missing(p, metric)), None)
    if start is None or start > at:
        return None
    return sum(1 for i, _ in distinct(trace[start:at + 1])) - 1


def report(path: str, rebase: bool = False) -> tuple[int, int, int, int, int, int]:
    """Print one trace's goals through the current table; return (right, faulted, clean, healthy, within, timed)."""
    runs: dict[str, dict[str, Any]] = json.loads(Path(path).read_text())
    right = faulted = clean = healthy = within = timed = 0
    changed, late = [], []
    for name, run in runs.items():
        if rebase:
            run = {**run, "trace": mean_prompt_baselines(run["trace"])}
        causes = decide(run["trace"])
        first = next((c for p, c in zip(run["trace"], causes, strict=True) if p["t"] >= 0 and c not in UNNAMED),
                     "none/unknown")
        if first != run["verdict"]:
            changed.append(f"{name} {run['verdict']} → {first}")
        if run["fault"]:
            faulted += 1
            right += first == run["expected"]
            got = lag(run, causes)
            if isinstance(got, int):
                timed += 1
                within += got <= 2
                if got > 2:
                    late.append(f"{name} +{got}")
        else:
            healthy += 1
            clean += first == "none/unknown"
    print(f"{path}: right {right}/{faulted}, no false cause {clean}/{healthy}, within two {within}/{timed}")
    print(f"  first cause changed from the daemon's: {', '.join(changed) or 'none'}")
    print(f"  late: {', '.join(late) or 'none'}")
    return right, faulted, clean, healthy, within, timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", help="benchmarks/diagnosis.py --trace files")
    ap.add_argument("--mean-prompt-baselines", action="store_true",
                    help="replay the median prompt baselines of traces before f595f1d as means")
    args = ap.parse_args()
    totals = [sum(x) for x in zip(*(report(p, args.mean_prompt_baselines) for p in args.traces), strict=True)]
    if len(args.traces) > 1:
        print("pooled: right {}/{}, no false cause {}/{}, within two {}/{}".format(*totals))


if __name__ == "__main__":
    main()
