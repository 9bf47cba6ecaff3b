"""Probe exposition: cumulative histograms, outcomes, tokens, freshness, overhead, exemplars (OpenMetrics)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.parser import text_string_to_metric_families
from support.exposition import unknown_in_text

from sloguard.model import ProbeResult
from sloguard.outcome import outcome
from sloguard.probes.metrics import ProbeMetrics
from sloguard.probes.timing import ITL_BUCKETS, gap_stats

TRACE = "0af7651916cd43dd8448eb211c80319c"


class _Fixed:
    def __init__(self, fams: list[Metric]) -> None:
        self.fams = fams

    def collect(self) -> Iterable[Metric]:
        return self.fams


def render(m: ProbeMetrics, now: float, openmetrics: bool = False) -> str:
    reg = CollectorRegistry()
    reg.register(_Fixed(m.families(now)))
    return (generate_openmetrics if openmetrics else generate_latest)(reg).decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


# per-token gaps 0.01, 0.02, 0.02 (events at 0, 10, 30 and 50 ms) as the probe process summarises them
GAPS = gap_stats([(0, 1.0), (10_000_000, 1.0), (30_000_000, 1.0), (50_000_000, 1.0)])
assert GAPS is not None


def ok(ts: float, ttft: float | None, **kw: object) -> ProbeResult:
    fields: dict[str, object] = {"e2e_s": (ttft or 0.0) + 0.1, "tpot_s": 0.01, "itl_counts": GAPS.counts,
                                 "itl_sum_s": GAPS.sum_s, "itl_p50_s": GAPS.p50_s, "itl_p99_s": GAPS.p99_s,
                                 "itl_max_s": GAPS.max_s,
                                 "output_tokens": 11, "prompt_tokens": 70, "connect_s": 0.0, **kw}
    fields = {"ttft_s": ttft, "ttfot_s": ttft, **fields}
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=True,
                       prompt_bucket="short", trace_id=TRACE, **fields)  # type: ignore[arg-type]


def failed(ts: float, error: str) -> ProbeResult:
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=False, error=error, ttft_s=9.0)


@pytest.mark.parametrize(("r", "want"), [
    (ok(1, 0.1), "success"), (failed(1, "timeout after 2s"), "timeout"), (failed(1, "http 500: x"), "error"),
    (ok(1, None), "empty"),  # only the end-of-sequence token: a success without TTFT
    (failed(1, "redirect 302 to http://h/x"), "redirect"),
    (failed(1, "event flood: more than 9 events"), "event_flood"),
    (failed(1, "not an event stream (text/html)"), "error"),
])
def test_outcome(r: ProbeResult, want: str) -> None:
    assert outcome(r) == want


def test_histograms_counters_and_freshness() -> None:
    m = ProbeMetrics(start=100.0)
    m.expect(["p", "never"])
    for r in (ok(150, 0.1), ok(151, 0.3), failed(152, "timeout after 2s"), failed(153, "boom")):
        m.observe(r)
    s = samples(render(m, now=160.0))
    hl = (("model", "m"), ("probe", "p"), ("prompt_bucket", "short"), ("target", "t"))
    assert s[("sloguard_probe_ttft_seconds_bucket", (("le", "0.1"), *hl))] == 1
    assert s[("sloguard_probe_ttft_seconds_bucket", (("le", "0.3"), *hl))] == 2
    assert s[("sloguard_probe_ttft_seconds_count", hl)] == 2  # the failures are in their own prompt bucket
    assert s[("sloguard_probe_ttft_seconds_sum", hl)] == pytest.approx(0.4)
    assert s[("sloguard_probe_itl_seconds_count", hl)] == 6  # every per-token gap
    assert s[("sloguard_probe_itl_seconds_sum", hl)] == pytest.approx(0.1)
    assert s[("sloguard_probe_itl_seconds_bucket", (("le", "0.01"), *hl))] == 2
    assert s[("sloguard_probe_itl_seconds_bucket", (("le", "0.02"), *hl))] == 6
    pt = (("probe", "p"), ("target", "t"))
    for out, n in (("success", 2), ("timeout", 1), ("error", 1)):
        assert s[("sloguard_probe_requests_total", (("outcome", out), *pt))] == n
    assert s[("sloguard_probe_output_tokens_total", pt)] == 22
    assert s[("sloguard_probe_prompt_tokens_total", pt)] == 140
    # success happens when the request ends: started at 151, e2e 0.4 s
    assert s[("sloguard_probe_last_success_timestamp_seconds", (("probe", "p"),))] == pytest.approx(151.4)
    assert s[("sloguard_probe_last_success_age_seconds", (("probe", "p"),))] == pytest.approx(8.6)
    assert s[("sloguard_probe_last_success_age_seconds", (("probe", "never"),))] == 60  # since start
    assert not any(name == "sloguard_probe_timing_overhead_seconds" for name, _ in s)


def test_failed_requests_count_what_they_reached_and_censored_in_inf() -> None:
    m = ProbeMetrics(start=100.0)
    before_token = ProbeResult(ts=1, probe="p", target="t", model="m", api="chat", ok=False, error="timeout",
                               connect_s=0.01, elapsed_s=2.0, prompt_bucket="short")
    after_token = ProbeResult(ts=2, probe="p", target="t", model="m", api="chat", ok=False, error="timeout",
                              connect_s=0.01, ttft_s=0.5, ttfot_s=0.5, e2e_s=1.0, elapsed_s=2.0,
                              prompt_bucket="short")
    for r in (before_token, after_token):
        m.observe(r)
    s = samples(render(m, now=160.0))
    hl = (("model", "m"), ("probe", "p"), ("prompt_bucket", "short"), ("target", "t"))
    inf = (("le", "+Inf"), *hl)
    # TTFT: one measured (0.5 s), one timed out before its first token: +Inf, its 2 s elapsed into _sum
    assert s[("sloguard_probe_ttft_seconds_bucket", (("le", "1.0"), *hl))] == 1
    assert (s[("sloguard_probe_ttft_seconds_bucket", inf)], s[("sloguard_probe_ttft_seconds_sum", hl)]) == (2, 2.5)
    assert s[("sloguard_probe_e2e_seconds_bucket", (("le", "60.0"), *hl))] == 0  # E2E never reached
    assert s[("sloguard_probe_e2e_seconds_count", hl)] == 2
    assert s[("sloguard_probe_connect_seconds_bucket", (("le", "0.01"), *hl))] == 2  # both connected
    # ITL and TPOT: only the request that was decoding, in +Inf (a failed request keeps no per-token gaps)
    assert s[("sloguard_probe_itl_seconds_count", hl)] == 1 and s[("sloguard_probe_tpot_seconds_count", hl)] == 1
    assert s[("sloguard_probe_itl_seconds_bucket", (("le", "2.5"), *hl))] == 0


def test_overhead_gauge() -> None:
    m = ProbeMetrics()
    m.set_overhead(0.00012)
    assert samples(render(m, 0.0))[("sloguard_probe_timing_overhead_seconds", ())] == 0.00012


def test_exemplars_only_in_openmetrics() -> None:
    m = ProbeMetrics()
    m.observe(ok(150, 0.1))
    om = render(m, 160.0, openmetrics=True)
    line = next(x for x in om.splitlines() if x.startswith('sloguard_probe_ttft_seconds_bucket') and 'le="0.1"' in x)
    assert f'# {{trace_id="{TRACE}"}} 0.1 150' in line
    assert "trace_id" not in render(m, 160.0)
    itl = [x for x in om.splitlines() if x.startswith("sloguard_probe_itl_seconds_bucket") and "trace_id" in x]
    # exemplars carry exact per-token values of the request (its p50, p99, max: all 0.02 here)
    assert len(itl) == 1 and 'le="0.02"' in itl[0] and f'3.0 # {{trace_id="{TRACE}"}} 0.02 150' in itl[0]


def test_empty_answer_counts_as_success_without_ttft() -> None:
    m = ProbeMetrics()
    m.observe(ok(150, None, ttfot_s=None, tpot_s=None, itl_counts=(), itl_sum_s=0.0))
    s = samples(render(m, 160.0))
    assert s[("sloguard_probe_requests_total", (("outcome", "empty"), ("probe", "p"), ("target", "t")))] == 1
    assert not any(name.startswith("sloguard_probe_ttft") and name.endswith("_count") for name, _ in s)
    assert len(ITL_BUCKETS) + 1 == len(GAPS.counts)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not on PATH")
def test_promtool_check_metrics_clean() -> None:
    m = ProbeMetrics()
    m.expect(["p"])
    m.set_overhead(0.0001)
    m.observe(ok(150, 0.1))
    m.observe(failed(151, "boom"))
    res = subprocess.run(["promtool", "check", "metrics"], input=render(m, 160.0), capture_output=True,
                         text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert unknown_in_text(render(m, 160.0)) == []  # `sloguard check` knows every name and label exported


@pytest.mark.parametrize(("configured", "late", "kept"), [
    (["p"], [], {"p"}),
    (["q"], [], {"q"}),               # p removed by reload: all its series go, q appears
    (["q"], ["p"], {"q"}),            # a late result of the removed probe does not bring it back
    ([], [], set()),
])
def test_expect_replaces_the_configured_probes(configured: list[str], late: list[str], kept: set[str]) -> None:
    m = ProbeMetrics(start=100.0)
    m.expect(["p"])
    m.observe(ok(150, 0.1))
    m.expect(configured)
    for probe in late:
        m.observe(ProbeResult(ts=155, probe=probe, target="t", model="m", api="chat", ok=True, ttft_s=0.1))
    probes = {dict(labels).get("probe") for _, labels in samples(render(m, now=160.0))}
    assert probes - {None} == kept
