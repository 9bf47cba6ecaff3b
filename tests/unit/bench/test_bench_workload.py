"""Seeded workload (probe prompt mix or dataset) and the dataset reader's formats and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sloguard.bench.dataset import DatasetError, estimate_tokens, load_dataset
from sloguard.bench.workload import WorkloadSpec
from sloguard.probes.job import ProbeJob

JOB = ProbeJob(name="bench", target="t", api="chat", url="http://x", model="m", max_tokens=32,
               prompts=((64, 3.0), (512, 1.0)))


def test_same_seed_same_requests_and_no_repeats_across_stages() -> None:
    a, b = WorkloadSpec(JOB, seed=7), WorkloadSpec(JOB, seed=7)
    assert [a.request(0, i) for i in range(50)] == [b.request(0, i) for i in range(50)]
    # the same sizes in every stage, never the same text (prefix caches cannot hit)
    assert [a.request(0, i).prompt.tokens for i in range(50)] == [a.request(1, i).prompt.tokens for i in range(50)]
    assert all(a.request(0, i).prompt.text != a.request(1, i).prompt.text for i in range(50))
    assert WorkloadSpec(JOB, seed=8).request(0, 0) != a.request(0, 0)


def test_prompt_mix_weights_and_buckets() -> None:
    w = WorkloadSpec(JOB, seed=1)
    sizes = [w.request(0, i).prompt.tokens for i in range(4000)]
    assert 0.72 < sizes.count(64) / len(sizes) < 0.78
    assert {w.request(0, i).prompt.bucket for i in range(20)} == {"short", "medium"}
    assert w.job_for(w.request(0, 0)) is JOB


def test_dataset_rows_permuted_per_round_with_their_max_tokens() -> None:
    rows = tuple((f"prompt {i}", i + 1) for i in range(10))
    w = WorkloadSpec(JOB, seed=3, rows=rows)
    first = [w.request(0, i) for i in range(10)]
    assert sorted(r.prompt.text for r in first) == sorted(t for t, _ in rows)  # each row once per round
    assert [r.prompt.text for r in first] != [t for t, _ in rows]  # shuffled
    assert all(r.max_tokens == int(r.prompt.text.split()[1]) + 1 for r in first)
    assert w.job_for(first[0]).max_tokens == first[0].max_tokens
    default = WorkloadSpec(JOB, seed=3, rows=(("hello", 0),))
    assert default.request(0, 5).max_tokens == 32


def _write(tmp: Path, rows: list[object], array: bool = False) -> str:
    p = tmp / "data.jsonl"
    p.write_text(json.dumps(rows) if array else "\n".join(json.dumps(r) for r in rows) + "\n")
    return str(p)


def test_dataset_formats(tmp_path: Path) -> None:
    rows = [
        {"prompt": "Say hi", "max_tokens": 5},
        {"prompt": "No cap"},
        {"conversations": [{"from": "system", "value": "be nice"}, {"from": "human", "value": "Q1"},
                           {"from": "gpt", "value": "x" * 40}]},
        {"messages": [{"role": "user", "content": "Q2"}, {"role": "assistant", "content": "yy"}]},
        {"conversations": [{"from": "gpt", "value": "orphan"}]},
        "not an object",
    ]
    d = load_dataset(_write(tmp_path, rows))
    assert d.rows == (("Say hi", 5), ("No cap", 0), ("Q1", 10), ("Q2", 1)) and d.skipped == 2
    assert load_dataset(_write(tmp_path, rows, array=True)).rows == d.rows
    assert load_dataset(_write(tmp_path, rows), limit=2).rows == d.rows[:2]
    assert estimate_tokens("") == 1 and estimate_tokens("abcde") == 2


@pytest.mark.parametrize(("content", "message"), [
    ('{"prompt": "a"}\n{not json}\n', ":2: not JSON"),
    ('{"prompt": "a", "max_tokens": -3}\n', ":1: max_tokens must be a positive integer"),
    ('{"text": "a"}\n', "no usable rows"),
    (b"\xff\xfe\x00", "not UTF-8"),
    ('[{"prompt": "a"}', "not a JSON array"),
])
def test_dataset_errors_name_the_file_and_line(tmp_path: Path, content: str | bytes, message: str) -> None:
    p = tmp_path / "bad.jsonl"
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    with pytest.raises(DatasetError, match=message) as info:
        load_dataset(str(p))
    assert str(p) in str(info.value)


def test_missing_dataset(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read"):
        load_dataset(str(tmp_path / "nope.jsonl"))


def test_a_rerun_of_the_seed_is_salted_unless_same_prompts() -> None:
    """Issue 48: two runs of one seed send the same sizes but other prompts; --same-prompts (salt "") replays them."""
    one, two, same = WorkloadSpec(JOB, 7, salt="0a1b2c3d"), WorkloadSpec(JOB, 7, salt="9f8e7d6c"), WorkloadSpec(JOB, 7)
    assert [one.request(0, i).prompt.tokens for i in range(50)] == [two.request(0, i).prompt.tokens for i in range(50)]
    assert all(one.request(0, i).prompt.text != two.request(0, i).prompt.text for i in range(50))
    assert [same.request(0, i) for i in range(20)] == [WorkloadSpec(JOB, 7).request(0, i) for i in range(20)]


def test_salted_runs_of_one_workload_have_one_identity_and_compare() -> None:
    """Two runs differing only in their per-run salt are the same workload to `sloguard report`; a seed is not."""
    from sloguard.bench.header import digest
    from sloguard.reports.bench import bench_differences, workload_of

    load = {"mode": "fixed", "kind": "concurrency", "levels": [1]}
    one, two = ({"seed": 7, "salt": salt, "api": "chat", "prompts": [[64, 1.0]]} for salt in ("0a1b2c3d", "9f8e7d6c"))
    other_seed = {**one, "seed": 8}
    heads = [{"workload": w, "load": load, "workload_digest": digest(w, load)} for w in (one, two, other_seed)]
    assert heads[0]["workload_digest"] == heads[1]["workload_digest"] != heads[2]["workload_digest"]
    assert bench_differences(workload_of(heads[0]), workload_of(heads[1])) == ([], [])
    refused, _ = bench_differences(workload_of(heads[0]), workload_of(heads[2]))
    assert refused == ["workload.seed: baseline 7, candidate 8"]
