"""ProbeFeed.drain: latency results for the SLOs, and every request that reached the engine for the diagnosis."""

from __future__ import annotations

from sloguard.model import ProbeResult
from sloguard.probes.feed import ProbeFeed


class _Worker:
    """Stands in for the probe process: drain() hands back queued results once."""

    def __init__(self, results: list[ProbeResult]) -> None:
        self.results = results
        self.overhead_seconds = self.stall_seconds = 0.0

    def drain(self) -> list[ProbeResult]:
        out, self.results = self.results, []
        return out


def _result(kind: str = "", **kw: object) -> ProbeResult:
    return ProbeResult(ts=100.0, probe=kind or "chat", target="t", model="m", api="chat", ok=True, ttft_s=0.2,
                       prompt_tokens=64, check_kind=kind, **kw)  # type: ignore[arg-type]


def test_abort_checks_reach_the_diagnosis_but_no_slo() -> None:
    feed = ProbeFeed([], history_size=10)
    latency, aborted, oversized = _result(), _result("abort"), _result("oversized_prompt")
    feed.worker = _Worker([latency, aborted, oversized])  # type: ignore[assignment]
    assert feed.drain(supervise=False) == [latency]
    # an abort check's prompt was prefilled by the engine (its prompt tokens are not the users'); an oversized
    # prompt is refused before the engine counts it
    assert feed.reached == [latency, aborted]
    assert feed.drain(supervise=False) == [] and feed.reached == []
