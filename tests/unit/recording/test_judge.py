"""The judge of a replayed recording: right cause, lag from the breach in evaluations, false causes."""

from __future__ import annotations

from sloguard.diagnose.model import Verdict
from sloguard.recording.judge import judge
from sloguard.recording.replay import Step

MARKS = [{"t": 10.0, "phase": "start"}, {"t": 20.0, "phase": "end"}]


def _steps(*causes: str, breach_from: int = 0) -> list[Step]:
    return [Step(float(i), "chat", i >= breach_from and c != "none",
                 Verdict("chat", float(i), "queue" if c not in ("none", "unknown") else "none", c, 1.0))  # type: ignore[arg-type]
            for i, c in enumerate(causes)]


def test_right_cause_within_two_evaluations_of_the_breach() -> None:
    causes = ["none"] * 10 + ["unknown", "unknown", "capacity", "capacity", "capacity"] + ["none"] * 6
    j = judge("r", _steps(*causes), MARKS, "capacity")
    assert (j.right, j.first, j.lag, j.held, j.false, j.breached_at) == (True, "capacity", 2, 1.0, 0, 0.0)


def test_a_cause_before_the_fault_or_another_after_the_right_one_is_false() -> None:
    causes = ["none"] * 5 + ["serving_cpu_bound"] + ["none"] * 4 + ["capacity", "long_prompts", "capacity"] + \
        ["none"] * 8
    j = judge("r", _steps(*causes), MARKS, "capacity")
    assert (j.right, j.false, j.lag) == (True, 2, 0) and j.held == 2 / 3


def test_a_healthy_recording_names_nothing_and_marks_missing_is_never_right() -> None:
    assert judge("h", _steps("none", "unknown", "none"), [], "none").right
    assert not judge("h", _steps("none", "capacity"), [], "none").right
    assert not judge("f", _steps("none", "none"), [], "capacity").right  # its fault was never marked
