"""Accuracy of the diagnosis on recorded real incidents (tests/fixtures/incidents/), per source, in seconds.

Each recording (benchmarks/record_incidents.py: a real engine, its fault and times) is replayed through sources →
windows → SLO → diagnosis on its own clock (sloguard.recording) twice: as recorded (the engine's process watched)
and as the README's minimal config would see it (no host.processes). Per source (llama.cpp, vLLM) it prints right
cause of the faulted recordings, false causes (evaluations naming a cause no fault explains: before the fault, in a
healthy recording, or another cause once the right one was named), verdict lag in evaluations after the breach
(goal: within 2), and how long the right verdict held. `--detail` prints every recording.

Run: .venv/bin/python benchmarks/diagnosis_recorded.py [DIR] [--detail]   (~1 s a recording)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sloguard.recording.judge import Judged, judge
from sloguard.recording.recorder import read_events
from sloguard.recording.replay import marks, meta, replay

DIR = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "incidents"
# Without a watched process a CPU engine's starvation has no signal: unknown is the honest verdict there.
MINIMAL_EXPECTED = {"serving_cpu_bound": "unknown"}


def judge_file(path: Path, use_host: bool = True) -> tuple[str, Judged]:
    """Return (source engine, score) of one recording, replayed with or without its host reads."""
    events = read_events(path)
    info = meta(events)
    expected = str(info.get("expected", "none"))
    if not use_host:
        expected = MINIMAL_EXPECTED.get(expected, expected)
    run = replay(events, use_host=use_host)
    steps = [s for s in run.steps if s.slo == run.cfg.slos[0].name]
    name = path.name.removesuffix(".jsonl.gz")
    return name.split("-")[0], judge(name, steps, marks(events), expected)


def agreement(path: Path) -> tuple[int, int]:
    """Return (evaluations whose replayed verdict equals the one the live daemon published, evaluations compared).

    Equal by construction while the diagnosis code is the one the recording was made with; after a rule change
    they differ where the change does (that is the point of replaying).
    """
    events = read_events(path)
    live = {round(float(e["t"]), 3): e["published"] for e in events if e.get("kind") == "verdicts"}
    run = replay(events)
    pairs = [(live[round(s.t, 3)].get(s.slo), f"{s.verdict.stage}/{s.verdict.cause}") for s in run.steps
             if round(s.t, 3) in live]
    return sum(a == b for a, b in pairs), len(pairs)


def table(rows: Sequence[tuple[str, Judged]]) -> list[str]:
    """Return the per-source lines: right cause, false causes, lag within two."""
    out = ["| source | recordings | right cause | no false cause (healthy) | false-cause evaluations | "
           "within 2 evaluations of the breach | right verdict held |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for source in sorted({s for s, _ in rows}):
        mine = [j for s, j in rows if s == source]
        faulted = [j for j in mine if j.incident]
        quiet = [j.name for j in mine if j.expected not in ("none", "unknown") and not j.incident]
        healthy = [j for j in mine if j.expected == "none"]
        timed = [j for j in faulted if j.lag is not None]
        held = [j.held for j in faulted if j.held is not None]
        out.append(f"| {source} | {len(mine)} | {sum(j.right for j in faulted)}/{len(faulted)} | "
                   f"{sum(j.false == 0 for j in healthy)}/{len(healthy)} | {sum(j.false for j in mine)} | "
                   f"{sum(j.lag <= 2 for j in timed)}/{len(timed)} | "
                   f"{(sum(held) / len(held) if held else 0):.0%} |"
                   + (f" (never breached, not counted: {', '.join(quiet)})" if quiet else ""))
    return out


def report(folder: Path, detail: bool = False) -> int:
    """Print the per-source tables of every recording in `folder` (as recorded, then as the minimal config)."""
    files = sorted(folder.glob("*.jsonl.gz"))
    for use_host, title in ((True, "as recorded (engine process watched)"), (False, "minimal config (no process)")):
        rows = [judge_file(f, use_host) for f in files]
        print(f"\n{title}:")
        print("\n".join(table(rows)))
        if detail:
            for _, j in rows:
                print(f"  {j.name}: expected {j.expected}, first {j.first or '-'}, right {j.right}, lag {j.lag}, "
                      f"held {j.held if j.held is None else f'{j.held:.0%}'}, false {j.false}, "
                      f"breach +{j.breached_at}s")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", nargs="?", type=Path, default=DIR)
    p.add_argument("--detail", action="store_true")
    p.add_argument("--agreement", action="store_true", help="also compare each replay with the verdicts the live "
                   "daemon published while recording")
    args = p.parse_args()
    if args.agreement:
        for f in sorted(args.dir.glob("*.jsonl.gz")):
            same, n = agreement(f)
            print(f"{f.name}: replay = live at {same}/{n} evaluations")
    return report(args.dir, args.detail)


if __name__ == "__main__":
    sys.exit(main())
