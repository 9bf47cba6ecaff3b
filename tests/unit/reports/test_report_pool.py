"""Several bench files per side, pooled: the rounds of an interleaved comparison (virtual time, known truth)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sloguard.reports.bench import side_from_records
from sloguard.reports.cli import main
from sloguard.reports.data import DataError, Side
from sloguard.reports.inputs import Context, load_sides
from sloguard.reports.pool import pool
from sloguard.reports.regression import Settings
from sloguard.reports.report import make
from sloguard.sim.benchfile import closed_run

N = 150  # requests per round


def run(seed: int, slow: float, release: str = "a", levels: tuple[int, ...] = (1,), n: int = N,
        max_tokens: int = 64) -> list[dict[str, Any]]:
    """One bench round on a host `slow` times slower than an idle one (every step stretched), same prompts."""
    return closed_run(seed, list(levels), n, time_scale=slow, labels={"release": release}, background_rps=0.0,
                      workload_seed=1, max_tokens=max_tokens)


def side(records: list[dict[str, Any]], role: str, name: str) -> Side:
    return side_from_records(records, role, name)


# A host that gets 30 % slower halfway through (another job started): four rounds of one release, A A' A A'.
HOST = (1.0, 1.0, 1.3, 1.3)


def rounds(role: str, slots: tuple[int, ...]) -> Side:
    return pool([side(run(10 + k, HOST[k]), role, f"round{k}.jsonl") for k in slots])


def test_interleaved_rounds_cancel_a_host_that_slowed_down() -> None:
    """One release against itself: back to back, the host's change reads as a regression; interleaved, it cannot."""
    one_after_the_other = make(rounds("baseline", (0, 1)), rounds("candidate", (2, 3)), Settings())
    interleaved = make(rounds("baseline", (0, 2)), rounds("candidate", (1, 3)), Settings())
    assert one_after_the_other["verdict"] == "regression"
    assert interleaved["verdict"] != "regression", [c for c in interleaved["cells"] if c["verdict"] == "regression"]


def test_a_real_regression_still_shows_through_interleaved_rounds() -> None:
    base = pool([side(run(20 + k, HOST[k]), "baseline", f"a{k}") for k in (0, 2)])
    cand = pool([side(run(30 + k, HOST[k] * 1.25), "candidate", f"b{k}") for k in (1, 3)])  # 25 % slower release
    doc = make(base, cand, Settings())
    e2e = next(c for c in doc["cells"] if (c["metric"], c["stat"], c["scope"]) == ("e2e", "p50", "overall"))
    assert doc["verdict"] == "regression" and e2e["verdict"] == "regression" and e2e["ci"][0] > 0.1, e2e


def test_the_pooled_side_holds_every_request_once_per_level_in_time_order() -> None:
    parts = [side(run(40, 1.0, levels=(1, 4), n=30), "baseline", "r0"),
             side(run(41, 2.0, levels=(4,), n=20), "baseline", "r1")]
    pooled = pool(parts)
    req = pooled.requests
    assert req is not None and req.n == 30 * 2 + 20 and pooled.count() == sum(p.count() for p in parts)
    assert [s.label for s in pooled.stages] == ["concurrency 1", "concurrency 4"]
    assert [int((req.stage == s.index).sum()) for s in pooled.stages] == [30, 50]
    assert pooled.spec == "r0 + r1" and pooled.identity == parts[0].identity
    # throughput of a level over both rounds: all its requests over all its time
    (r0, r1) = (next(s.rps for s in p.stages if s.level == 4) for p in parts)
    assert r0 is not None and r1 is not None
    assert pooled.stages[1].rps == pytest.approx(50 / (30 / r0 + 20 / r1))
    assert np.array_equal(req.latency["e2e"], np.concatenate([p.requests.latency["e2e"] for p in parts
                                                              if p.requests is not None]))
    assert pool([parts[0]]) is parts[0]


@pytest.mark.parametrize(("other", "message"), [
    (lambda: run(50, 1.0, release="b"), "r1 is sim vllm sloguard-sim-0.1.0 sim-llama-3-8b {release=b} but r0 is"),
    (lambda: run(50, 1.0, max_tokens=128), "ran another workload than r0: workload.max_tokens: r0 64, r1 128"),
])
def test_files_of_another_release_or_workload_are_refused(other: Any, message: str) -> None:
    with pytest.raises(DataError) as exc:
        pool([side(run(50, 1.0), "baseline", "r0"), side(other(), "baseline", "r1")])
    assert message in str(exc.value)


def test_a_search_run_or_a_store_input_is_not_pooled(tmp_path: Path) -> None:
    search = side(run(60, 1.0), "baseline", "s")
    search.max_load = {"value": 4.0}
    with pytest.raises(DataError, match="a search run"):
        pool([side(run(61, 1.0), "baseline", "r0"), search])
    with pytest.raises(DataError, match="only bench results files can be pooled"):
        load_sides(["a.jsonl", "store:release=a"], "baseline", Context())


def test_the_command_line_takes_several_files_per_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def write(name: str, records: list[dict[str, Any]]) -> str:
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return str(path)
    a = [write(f"a{k}.jsonl", run(70 + k, HOST[k])) for k in (0, 2)]
    b = [write(f"b{k}.jsonl", run(80 + k, HOST[k])) for k in (1, 3)]
    code = main(["--baseline", *a, "--candidate", b[0], "--candidate", b[1], "--format", "json", "--fail-on",
                 "regression"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["baseline"]["spec"] == " + ".join(a) and doc["candidate"]["requests"] == 2 * N
