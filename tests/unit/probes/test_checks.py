"""Guardrail check verdicts, the engine's abort signals per engine fixture, context discovery, check metrics."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fixtures import REPO, captured_metrics_dir

from sloguard.model import ProbeResult
from sloguard.probes.checkmetrics import CheckMetrics
from sloguard.probes.checks import EngineState, abort_outcome, oversized_outcome, prompt_words, released
from sloguard.probes.enginestate import CheckError, EngineReader, state
from sloguard.probes.oversized import context_from

OWN, SHARED = REPO / "tests" / "fixtures" / "metrics", captured_metrics_dir()

S = EngineState


@pytest.mark.parametrize(("base", "held", "now", "counting", "expected"), [
    (S(0, 0), S(2, 0), S(1, 0), False, True),  # running fell: taken as released while the count is unproven
    (S(0, 0), S(2, 0), S(1, 0), True, False),  # an earlier leaked request finished: the proven count decides
    (S(0, 0), S(2, 0), S(2, 1), True, True),
])
def test_a_proven_abort_count_alone_decides(base: S, held: S, now: S, counting: bool, expected: bool) -> None:
    assert released(base, held, now, counting) is expected


@pytest.mark.parametrize(("base", "held", "now", "expected"), [
    (S(0, 0), S(1, 0), S(0, 1), True),  # both signals move
    (S(0, 0), S(1, 0), S(1, 1), True),  # the abort count alone is exact (another request started meanwhile)
    (S(0, None), S(1, None), S(0, None), True),  # running only (llama.cpp, TGI)
    (S(0, None), S(1, None), S(1, None), False),  # still held
    (S(2, 5), S(3, 5), S(3, 5), False),
    (S(2, 5), S(3, 5), S(2, 5), True),  # vLLM V1 before the abort-metric fix: the count never moves
    (S(None, 5), S(None, 5), S(None, 5), False),  # abort count only, not moved
    (S(None, 5), S(None, 5), S(None, 6), True),
])
def test_released(base: S, held: S, now: S, expected: bool) -> None:
    assert released(base, held, now) is expected


@pytest.mark.parametrize(("seconds", "expected"), [(0.05, "released"), (2.0, "released"), (2.01, "slow_release"),
                                                   (None, "leaked")])
def test_abort_outcome(seconds: float | None, expected: str) -> None:
    assert abort_outcome(seconds, 2.0) == expected


@pytest.mark.parametrize(("status", "timed_out", "elapsed", "counted", "expected"), [
    (400, False, 0.01, None, "rejected"), (413, False, 0.9, None, "rejected"), (422, False, 3.0, None, "slow_reject"),
    (200, False, 0.5, 1008, "truncated"), (200, False, 0.5, 1600, "accepted"), (200, False, 0.5, None, "accepted"),
    (200, True, 20.0, None, "hung"), (None, True, 20.0, None, "hung"), (500, False, 0.1, None, "server_error"),
    (None, False, 0.1, None, "error"),
])
def test_oversized_outcome(status: int | None, timed_out: bool, elapsed: float, counted: int | None,
                           expected: str) -> None:
    assert oversized_outcome(status, timed_out, elapsed, 1.0, counted, 1024) == expected


def test_prompt_words_overflow_the_simulators_byte_count_too() -> None:
    words = prompt_words(1024)
    assert words == 1600 and words * 3.3 / 4 > 1024  # the simulator counts ~3.3 bytes per filler word / 4


# fixture -> (engine, running, aborted): the engine's own signals the abort check reads
ABORT_SIGNALS = {
    OWN / "vllm-0.11-spec-decode-abort.txt": ("vllm", 3.0, 7.0),
    SHARED / "vllm-v1-dynamo-2026-01.txt": ("vllm", 0.0, 0.0),
    OWN / "vllm-0.10-pre-rename.txt": ("vllm", 6.0, None),  # two engines summed; no abort reason in this page
    OWN / "sglang-spec-decode-abort.txt": ("sglang", 2.0, 4.0),
    SHARED / "sglang-dynamo-2026-01.txt": ("sglang", 0.0, None),
    OWN / "trtllm-serve-1.2-spec-decode.txt": ("trtllm", 1.0, 5.0),
    OWN / "llamacpp-pypi-0.3.36-server.txt": ("llamacpp", 0.0, None),
    OWN / "tgi-3.x-docs.txt": ("tgi", 3.0, None),
}


@pytest.mark.parametrize("path", list(ABORT_SIGNALS), ids=lambda p: p.name)
def test_engine_abort_signals_per_fixture(path: Path) -> None:
    engine, running, aborted = ABORT_SIGNALS[path]
    text = path.read_text()
    got = state(text, engine)
    assert (got.running, got.aborted) == (running, aborted)
    reader = EngineReader("http://x/metrics", "auto", None)
    assert reader._parse(text) == got and reader.engine == engine  # only the families that matter are parsed


def test_a_page_without_the_signals_is_no_verdict() -> None:
    with pytest.raises(CheckError, match="no engine signal"):
        EngineReader("http://x/metrics", "auto", None)._parse("# nothing\nfoo_bar 1\n")
    with pytest.raises(CheckError, match="no running gauge or abort counter"):
        EngineReader("http://x/metrics", "vllm", None)._parse("vllm:num_requests_waiting 1\n")


@pytest.mark.parametrize(("path", "doc", "expected"), [
    ("/v1/models", {"data": [{"id": "other", "max_model_len": 8}, {"id": "m", "max_model_len": 32768}]}, 32768),
    ("/v1/models", {"data": [{"id": "x", "max_model_len": 4096}]}, 4096),  # the only card
    ("/v1/models", {"data": [{"id": "m", "meta": {"n_ctx": 512, "n_ctx_train": 1024}}]}, 512),  # llama.cpp
    ("/props", {"default_generation_settings": {"n_ctx": 512}, "total_slots": 2}, 512),
    ("/props", {"n_ctx": 2048}, 2048),
    ("/info", {"max_input_tokens": 4095, "max_total_tokens": 4096}, 4095),  # TGI
    ("/info", {"max_input_length": 1024}, 1024),  # older TGI
    ("/v1/models", {"data": [{"id": "m"}]}, None), ("/props", [], None), ("/info", {"max_input_tokens": True}, None),
])
def test_context_from(path: str, doc: object, expected: int | None) -> None:
    assert context_from(path, doc, "m") == expected


def _check(outcome: str, seconds: float | None = 0.1, status: int | None = None) -> ProbeResult:
    return ProbeResult(0.0, "ab", "chat", "m", "chat", outcome in ("released", "rejected"), check_kind="abort",
                       check_outcome=outcome, check_s=seconds, status_code=status)


def _series(m: CheckMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for fam in m.families() for s in fam.samples}


def test_check_metrics_count_outcomes_and_failures_in_a_row() -> None:
    m = CheckMetrics()
    m.expect({"ab": 2.0})
    for outcome in ("leaked", "error", "slow_release", "released", "leaked"):
        m.observe(_check(outcome, 3.0 if outcome != "released" else 0.05))
    got = _series(m)
    key = (("check", "abort"), ("probe", "ab"), ("target", "chat"))
    assert got[("sloguard_check_consecutive_failures", key)] == 1.0  # error neither adds nor resets
    assert got[("sloguard_check_passed", key)] == 0.0 and got[("sloguard_check_seconds", key)] == 3.0
    assert got[("sloguard_check_bound_seconds", key)] == 2.0
    assert got[("sloguard_check_runs_total", (*key[:1], ("outcome", "leaked"), *key[1:]))] == 2.0
    m.expect({})
    assert _series(m) == {}


def test_engine_reader_reads_a_body_that_arrives_in_pieces() -> None:
    """aiohttp's content.read(n) may return the first piece only: the reader must take the whole page."""
    import asyncio

    from aiohttp import web

    from sloguard.probes.stream import make_session

    page = (OWN / "vllm-0.11-spec-decode-abort.txt").read_bytes()

    async def metrics(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        for i in range(0, len(page), 512):
            await resp.write(page[i:i + 512])
            await asyncio.sleep(0.001)
        await resp.write_eof()
        return resp

    async def main() -> EngineState:
        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with make_session() as session:
                return await EngineReader(f"http://127.0.0.1:{port}/metrics", "vllm", None).read(session)
        finally:
            await runner.cleanup()

    assert asyncio.run(main()) == EngineState(3.0, 7.0)
