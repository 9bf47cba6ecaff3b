"""Decide a verdict from Inputs with the RULES table: pure, no clock of its own, never a guess.

1. No breached objective: stage none, cause none.
2. The breach furthest over its threshold whose rise a stage explains names the whole (TTFT, TPOT, ...).
   Its parts are stages (PARTS); the stage whose value rose most above its own healthy baseline is the bottleneck, if it
   explains at least MIN_SHARE of the whole's rise and rose by at least MIN_RISE of its baseline. TPOT,
   ITL and decode breaches are the decode stage itself (a rise that took it over an objective it met
   counts once it is MIN_RISE or the objective's headroom over its baseline, whichever is less). Where more
   of the whole's requests than its tail (1 − q) have no per-request stages (cut short before the server's
   record), the whole's quantile may consist of those alone: the stage must then explain MIN_SHARE of the
   stages' summed rise instead. Either way its rise must be at least MIN_PART of the whole's excess over the
   objective (a few ms cannot be where seconds went).
3. The first RULES row (precedence order) that can explain that stage and whose conditions hold names the
   cause. No row: `unknown`, naming the signals that were not available to the rows that could explain it.
   A breach no stage explains (or one that misses over the SLO's window but not over a shorter diagnosis
   window: nothing there to locate) is named only by a row marked `unlocated` (an engine restart: its failed and
   cut-short requests have no stages, and it explains every symptom after it; a sick or throttled GPU, a
   CPU-bound serving process and prompts 3x longer, which slow every stage; a full KV cache, whose held-back
   requests time out without stages); else `unknown`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from sloguard.diagnose.model import Breach, Evidence, Inputs, Reading, Stage, Verdict
from sloguard.diagnose.rules import RULES, CauseRule, Condition

# whole -> its stages; decode-like wholes are the decode stage itself
PARTS: dict[str, tuple[str, ...]] = {
    "ttft": ("network", "queue", "prefill"), "ttfot": ("network", "queue", "prefill"),
    "e2e": ("network", "queue", "prefill", "decode"), "tpot": ("decode",), "itl": ("decode",),
    "decode": ("decode",), "queue": ("queue",), "prefill": ("prefill",), "network": ("network",),
}
MIN_SHARE = 0.5  # the bottleneck stage explains at least half of the whole's rise
MIN_RISE = 0.25  # ... and rose at least 25% above its own baseline
MIN_RISE_S = 0.002  # ... and by at least 2 ms (below that, timer noise)
# ... and by at least a tenth of how far the whole is over its objective. Where the whole's tail is requests cut
# short (no stages), the staged requests' rises are all there is: a 4 ms network rise was "100% of the stages'
# rise" and named `network` for a 4.9 s TTFT made of timed-out requests (KV cache too small, benchmark trace).
MIN_PART = 0.1
EASING = "no stage to locate: it misses over the SLO's window, not over the diagnosis window (easing, or intermittent)"
CONTEXT = ("requests_waiting", "kv_cache_usage_ratio", "preemptions_per_second")


def _compare(c: Condition, value: float, baseline: float | None) -> tuple[bool, str]:
    ok = {">=": value >= c.threshold, "<=": value <= c.threshold, ">": value > c.threshold,
          "<": value < c.threshold}[c.op]
    text = f"{c.op} {c.threshold:g}" if math.isfinite(c.threshold) else ""
    if c.vs_baseline is None:
        return ok, text
    if c.op in ("<", "<="):  # "has not risen to factor × its baseline": no baseline cannot show that it rose
        if baseline is None:
            return ok, f"{text}; baseline not learned yet, not shown to have risen".lstrip("; ")
        bound = max(c.vs_baseline * baseline, c.floor)
        floor = f" (or {c.floor:g})" if c.floor else ""
        return ok and value < bound, \
            f"{text} and < {c.vs_baseline:g}× baseline {baseline:.3g}{floor}".removeprefix(" and ")
    if baseline is None:
        return False, f"{text}; baseline not learned yet"
    ok = ok and (value >= c.vs_baseline * baseline if baseline > 0 else True)
    return ok, text + f" and ≥ {c.vs_baseline:g}× baseline {baseline:.3g}"


def check(c: Condition, inp: Inputs) -> Evidence:
    """Return the evidence of one condition; not available -> its first available alternative decides, else it
    holds only if the condition is optional."""
    value = inp.signals.get(c.signal)
    if value is None:
        alt = next((a for a in c.alternatives if a.signal in inp.signals), None)
        if alt is not None:
            return check(alt, inp)
        names = " or ".join(a.signal for a in c.alternatives)
        return Evidence(c.signal, None, f"not available{' (nor ' + names + ')' if names else ''}", c.optional)
    ok, text = _compare(c, value, inp.baselines.get(c.signal))
    return Evidence(c.signal, value, text, ok, inp.notes.get(c.signal, ""))


def apply(rule: CauseRule, inp: Inputs) -> tuple[bool, list[Evidence], list[str]]:
    """Return (holds, evidence, missing signals) of one row."""
    needs = [check(c, inp) for c in rule.needs]
    any_of = [dataclasses.replace(e, holds=False) if e.value is None else e  # an absent alternative never holds
              for e in (check(c, inp) for c in rule.any_of)]
    holds = all(e.holds for e in needs) and (not any_of or any(e.holds for e in any_of))
    # Missing evidence: a signal that is not available and not optional (an optional one only adds weight).
    missing = [c.signal for c, e in zip((*rule.needs, *rule.any_of), (*needs, *any_of), strict=True)
               if e.value is None and not c.optional]
    if any_of and any(e.holds for e in any_of):
        any_of = [e for e in any_of if e.holds]  # show what held, not the alternatives that did not
    return holds, needs + any_of, missing


def _rise(r: Reading, headroom: float | None = None) -> float | None:
    """Return the stage's rise over its baseline when it counts as risen, else None (or 0.0 when not).

    `headroom` (objective − baseline, for a stage that is itself the breached whole) caps the rise asked for:
    a TPOT that sat 7% under its objective and breached it rose enough to matter (traces: a CPU burn's TPOT
    at 161-163 ms against a 139 ms baseline and a 150 ms objective was "no single stage" for 6-30 s).
    """
    excess = r.excess
    if excess is None:
        return None
    ref = r.baseline if r.baseline is not None else r.budget or 0.0
    need = MIN_RISE * ref if headroom is None or headroom <= 0 else min(MIN_RISE * ref, headroom)
    return excess if excess >= max(MIN_RISE_S, need) else 0.0


def _stage_evidence(r: Reading, whole: str, share: float | None) -> Evidence:
    ref = f"baseline {r.baseline:.3g}s" if r.baseline is not None else \
        f"objective {r.budget:.3g}s, no healthy baseline yet" if r.vs_objective else f"budget {r.budget:.3g}s"
    share_text = f", {share:.0%} of the {whole} increase" if share is not None else ""
    why = "requests cut short" if r.source == "probe" else "from engine histograms"
    interval = "" if r.lo == r.hi else " (at least: requests cut short)" if math.isinf(r.hi) else \
        f" (within [{r.lo:.3g}, {r.hi:.3g}]s, {why})"
    return Evidence(f"{r.stage}", r.value, f"{ref} (+{r.excess or 0.0:.3g}s{share_text}){interval}", True,
                    r.source)


def locate(breach: Breach, inp: Inputs) -> tuple[Stage | None, float | None, list[Evidence], list[str]]:
    """Return (stage, share of the whole's rise, evidence, missing) for a breach; stage None = not located."""
    parts = PARTS.get(breach.metric, ())
    if parts == ("decode",):  # per-token metrics are the decode stage itself: it must have risen
        r = inp.readings.get(breach.metric) or inp.readings.get("decode")
        # Breaching since before any healthy evaluation (sloguard started beside a sick server): no baseline, so
        # it is compared with its objective and located only MIN_RISE above it.
        if r is not None and r.baseline is None and r.budget is None:
            r = dataclasses.replace(r, budget=breach.threshold, vs_objective=True)
        headroom = breach.threshold - r.baseline if r is not None and r.baseline is not None else None
        rise = None if r is None else _rise(r, headroom)
        if r is None or rise is None:
            return None, None, [], [f"{breach.metric} baseline (learned from healthy evaluations)"]
        if rise <= 0.0:
            return None, None, [_stage_evidence(r, breach.metric, None)], []
        return "decode", None, [_stage_evidence(r, breach.metric, None)], []
    missing = [f"{p} stage" for p in parts if p not in inp.readings]
    rises = {p: _rise(inp.readings[p]) for p in parts if p in inp.readings}
    if not rises or all(v is None for v in rises.values()):
        return None, None, [], [*missing, "stage baselines (learned from healthy evaluations)"]
    stage = max(rises, key=lambda p: rises[p] or 0.0)
    rise = rises[stage] or 0.0
    whole = inp.readings.get(breach.metric)
    whole_rise = whole.excess if whole is not None else None
    if whole is not None and whole.uncovered > 1.0 - breach.quantile:
        whole_rise = sum(v for v in rises.values() if v)  # the whole's tail may hold no staged request at all
    share = min(1.0, rise / whole_rise) if whole_rise else None
    over = breach.value - breach.threshold
    if rise <= 0.0 or (share is not None and share < MIN_SHARE) or rise < MIN_PART * over:
        ev = [_stage_evidence(inp.readings[p], breach.metric, None) for p in rises if rises[p] is not None]
        return None, share, ev, missing
    return stage, share, [_stage_evidence(inp.readings[stage], breach.metric, share)], missing  # type: ignore[return-value]


def _compared(b: Breach) -> str:
    if not b.recent:
        return f"≤ {b.threshold:g}s over the diagnosis window; misses over the SLO's window"
    return f"≥, requests cut short could exceed {b.threshold:g}s" if b.censored else f"> {b.threshold:g}s"


def _context(inp: Inputs, shown: Iterable[Evidence]) -> list[Evidence]:
    have = {e.signal for e in shown}
    return [Evidence(s, inp.signals[s], "context", True) for s in CONTEXT if s in inp.signals and s not in have]


def _named(rule: CauseRule, inp: Inputs, stage: Stage, share: float | None,
           shown: tuple[Evidence, ...]) -> Verdict | None:
    """Return the verdict naming the row's cause when its conditions hold, else None."""
    holds, ev, _ = apply(rule, inp)
    if not holds:
        return None
    conf = (share if share is not None else 1.0) * (0.8 if any(e.value is None for e in ev) else 1.0)
    reading = inp.readings.get(stage)
    conf *= 0.8 if reading is not None and reading.source == "server" else 1.0
    evidence = (*shown, *ev)
    return Verdict(inp.slo, inp.now, stage, rule.cause, round(conf, 2), (*evidence, *_context(inp, evidence)),
                   rule.lever, share=share)


def holding(inp: Inputs) -> frozenset[str]:
    """Return the causes whose evidence holds now, breach or not: the state rows whose conditions hold.

    State rows (`unlocated` or `state`): their evidence is a state of the engine or its load (a restart, a sick
    or throttled GPU, longer prompts, a full KV cache, a pinned serving CPU, a surge of users or a queue) wherever
    the time went, so evidence that held before a breach confirms the cause at the breach (benchmark trace: a
    load surge's arrivals read 4.8-7.6 sd over their rate for 5 s before a TPOT breach that lasted one
    evaluation; the verdict waited for the next breach, 14 evaluations later). The network rows are not: "measured
    per request" holds at every healthy evaluation and is evidence only beside the network stage.
    """
    return frozenset(rule.cause for rule in RULES if (rule.unlocated or rule.state) and apply(rule, inp)[0])


def sure(inp: Inputs) -> frozenset[str]:
    """Return the causes a row marked `sure` (a level far past healthy noise) names now, breach or not."""
    return frozenset(rule.cause for rule in RULES if rule.sure and apply(rule, inp)[0])


def decide(inp: Inputs) -> Verdict:
    """Return the verdict for one SLO (module docstring)."""
    return candidates(inp)[0]


def candidates(inp: Inputs) -> tuple[Verdict, ...]:
    """Return the verdict of every RULES row that holds, in precedence order; else the one none/unknown verdict.

    decide() is the first; the rest let the confirmation (sloguard.diagnose.confirm) keep a cause that still
    holds while a row above it only flickers.
    """
    if not inp.breaches:
        return (Verdict(inp.slo, inp.now, "none", "none", 1.0),)
    # The breach furthest over its threshold that a stage explains; else the worst one, unexplained. One that
    # misses only over the SLO's longer window (not recent) is not located: the diagnosis window has no excess.
    ordered = sorted(inp.breaches, key=lambda b: (not b.recent, -b.severity))
    located = [(b, locate(b, inp) if b.recent else (None, None, [], [])) for b in ordered]
    breach, (stage, share, stage_ev, missing) = next(((b, got) for b, got in located if got[0] is not None),
                                                      located[0])
    head = Evidence(f"p{breach.quantile * 100:g} {breach.metric}", breach.value, _compared(breach), True)
    if stage is None:
        named = [v for v in (_named(rule, inp, "none", None, (head, *stage_ev)) for rule in RULES if rule.unlocated)
                 if v is not None]
        lever = "no single stage explains the increase" if breach.recent else EASING
        return tuple(dataclasses.replace(v, breach=breach) for v in named) or (
            Verdict(inp.slo, inp.now, "none", "unknown", 0.0, (head, *stage_ev), missing=tuple(missing),
                    lever=lever, breach=breach, share=share),)
    missing, out = [], []
    for rule in RULES:
        if stage not in rule.stages:
            continue
        verdict = _named(rule, inp, stage, share, (head, *stage_ev))
        if verdict is not None:
            out.append(dataclasses.replace(verdict, breach=breach))
        elif not out:
            missing += [g for g in apply(rule, inp)[2] if g not in missing]
    if out:
        return tuple(out)
    lever = ("make available: " + ", ".join(missing)) if missing else "no known cause matches the evidence"
    evidence = (head, *stage_ev)
    return (Verdict(inp.slo, inp.now, stage, "unknown", 0.0, (*evidence, *_context(inp, evidence)), lever,
                    tuple(missing), breach, share),)
