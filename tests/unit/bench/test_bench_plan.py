"""Command-line plan: levels, warm-up, stage sizes, arrivals and the split between workers."""

from __future__ import annotations

import itertools
import random

import pytest

from sloguard.bench import options
from sloguard.bench.plan import (
    StageSize,
    arrivals,
    deadline_s,
    orders,
    parse_labels,
    parse_levels,
    parse_warmup,
    worker_count,
)


def _args(*argv: str) -> object:
    return options.parser().parse_args(["-c", "x.yaml", "--target", "t", "-o", "r.jsonl", *argv])


def test_levels_and_labels() -> None:
    assert parse_levels("1,4,16", "concurrency") == (1.0, 4.0, 16.0)
    assert parse_levels("0.5, 2", "rate") == (0.5, 2.0)
    for bad in ("1.5", "0", "x", "-2"):
        with pytest.raises(ValueError, match="--concurrency"):
            parse_levels(bad, "concurrency")
    assert parse_labels(["release=v0.11", "gpu=H100 80GB"]) == {"release": "v0.11", "gpu": "H100 80GB"}
    with pytest.raises(ValueError, match="key=value"):
        parse_labels(["novalue"])


def test_warmup_is_a_duration_or_a_count() -> None:
    assert parse_warmup("10s") == (10.0, 0)
    assert parse_warmup("50") == (0.0, 50)
    with pytest.raises(ValueError, match="--warmup"):
        parse_warmup("ten")


@pytest.mark.parametrize(("argv", "message"), [
    ((), "give --concurrency"), (("--concurrency", "1", "--rate", "2"), "not both"),
    (("--rate", "1", "--duration", "5s", "--requests", "3"), "not both"),
    (("--find-max-load", "--rate", "1,2"), "one starting load"),
    (("--find-max-load", "--rate", "4", "--max-load", "2"), "search bounds"),
    (("--concurrency", "1", "--requests", "0"), "--requests"),
])
def test_bad_combinations(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        options.build_plan(_args(*argv))  # type: ignore[arg-type]


def test_plans() -> None:
    p = options.build_plan(_args("--concurrency", "1,4", "--warmup", "5s"))  # type: ignore[arg-type]
    assert (p.mode, p.kind, p.levels, p.size) == ("sweep", "concurrency", (1.0, 4.0), StageSize(60.0, None, 5.0, 0))
    s = options.build_plan(_args("--find-max-load", "--rate", "2", "--requests", "100"))  # type: ignore[arg-type]
    assert s.mode == "search" and s.search is not None
    assert (s.search.kind, s.search.start, s.search.max_load, s.search.min_load) == ("rate", 2.0, 10_000.0, 2 / 64)
    d = options.build_plan(_args("--find-max-load"))  # type: ignore[arg-type]
    assert d.search is not None and (d.search.kind, d.search.start, d.search.min_load) == ("concurrency", 1.0, 1.0)


def test_prompt_mix() -> None:
    assert options.parse_prompt_mix("64:50,128:35,256") == ((64, 50.0), (128, 35.0), (256, 1.0))
    with pytest.raises(ValueError, match="TOKENS:WEIGHT"):
        options.parse_prompt_mix("a:b")


def test_arrivals_duration_with_timed_warmup() -> None:
    """4/s constant for 2 s after a 1 s warm-up: the stage lasts 3 s."""
    offsets = arrivals(4.0, StageSize(2.0, None, warmup_s=1.0), "constant", random.Random(0))
    assert offsets == pytest.approx([i / 4 for i in range(12)])


def test_arrivals_request_count_after_counted_warmup() -> None:
    offsets = arrivals(10.0, StageSize(None, 5, warmup_n=3), "constant", random.Random(0))
    assert offsets == pytest.approx([i / 10 for i in range(8)])


def test_poisson_arrivals_are_seeded_and_near_the_rate() -> None:
    a = arrivals(50.0, StageSize(100.0, None), "poisson", random.Random("s"))
    b = arrivals(50.0, StageSize(100.0, None), "poisson", random.Random("s"))
    assert a == b and 4500 < len(a) < 5500 and all(x < y for x, y in itertools.pairwise(a))


def test_orders_split_streams_quota_and_arrivals() -> None:
    size = StageSize(None, 10, warmup_n=2)
    c = orders(3, "concurrency", 5, size, 2, 123, [])
    assert [(o.streams, o.quota, o.first_seq, o.stride) for o in c] == [(3, 5, 0, 2), (2, 5, 1, 2)]
    assert all(o.stage == 3 and o.start_ns == 123 and o.warmup_n == 2 for o in c)
    r = orders(0, "rate", 2.0, StageSize(10.0, None), 3, 0, [0.0, 0.5, 1.0, 1.5])
    assert [o.arrivals for o in r] == [((0, 0.0), (3, 1.5)), ((1, 0.5),), ((2, 1.0),)]


@pytest.mark.parametrize(("kind", "level", "asked", "cpus", "n"), [
    ("concurrency", 16, None, 2, 1), ("concurrency", 1024, None, 8, 4), ("concurrency", 1024, None, 2, 1),
    ("rate", 450, None, 16, 3), ("rate", 1, 3, 2, 3),
])
def test_worker_count(kind: str, level: float, asked: int | None, cpus: int, n: int) -> None:
    assert worker_count(kind, level, asked, cpus, 256, 200.0) == n  # type: ignore[arg-type]


def test_every_option_has_help() -> None:
    p = options.parser()
    assert p.description and "exit status" in (p.epilog or "")
    for action in p._actions:
        assert action.help, f"`sloguard bench` option {action.option_strings} has no help"


@pytest.mark.parametrize(("kind", "level", "size", "workers", "offsets", "expected"), [
    # timed: warm-up + duration + one request at its timeout (10 s) and slack (1 s)
    ("concurrency", 4, StageSize(60.0, None, warmup_s=5.0), 1, [], 5 + 60 + 11),
    # 40 requests over 4 streams of one worker: a chain of 10 requests, each at most 11 s
    ("concurrency", 4, StageSize(None, 40), 1, [], 10 * 11),
    # uneven split: 40 over 3 workers with 2, 1, 1 streams -> the 13-request quota of a one-stream worker
    ("concurrency", 4, StageSize(None, 40), 3, [], 13 * 11),
    # a counted warm-up lengthens every chain; a timed one comes first (and one request may overlap its end)
    ("concurrency", 4, StageSize(None, 40, warmup_n=8), 1, [], 12 * 11),
    ("concurrency", 4, StageSize(None, 40, warmup_s=5.0), 1, [], 5 + 11 + 10 * 11),
    # open loop: the last arrival, then one request
    ("rate", 2.0, StageSize(None, 3), 2, [0.5, 1.0, 1.5], 1.5 + 11),
])
def test_deadline_is_every_request_at_its_timeout(kind: str, level: float, size: StageSize, workers: int,
                                                  offsets: list[float], expected: float) -> None:
    stage = orders(0, kind, level, size, workers, 0, offsets)  # type: ignore[arg-type]
    assert deadline_s(stage, size, 10.0, 1.0) == pytest.approx(expected)
