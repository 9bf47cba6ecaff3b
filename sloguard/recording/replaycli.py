"""`sloguard replay` (sloguard.recording.cli holds both commands)."""

from __future__ import annotations

from collections.abc import Sequence

from sloguard.recording.cli import replay_main


def main(argv: Sequence[str]) -> int:
    """Replay a recording and print its verdicts."""
    return replay_main(argv)
