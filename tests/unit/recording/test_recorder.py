"""The recording format: probe results round-trip, a recording killed mid-write still reads, marks and meta merge."""

from __future__ import annotations

import gzip
from pathlib import Path

from sloguard.model import ProbeResult, Sample
from sloguard.recording.codec import drain_of, result_doc, result_of
from sloguard.recording.recorder import Recorder, read_events
from sloguard.recording.replay import marks, meta

RESULT = ProbeResult(ts=1.0, probe="p", target="t", model="m", api="chat", ok=False, error="timeout",
                     connect_s=0.0004, head_s=None, head_raw_s=1.25, elapsed_s=3.9, prompt_tokens=48,
                     itl_counts=(1, 2), t0_ns=5)


def test_a_probe_result_round_trips_with_the_raw_head_and_without_live_only_counts() -> None:
    back = result_of(result_doc(RESULT))
    assert back.head_raw_s == 1.25 and back.connect_s == 0.0004 and back.error == "timeout"
    assert back.itl_counts == () and back.t0_ns == 0  # per-bucket counts and the perf clock are not recorded
    assert result_of({**result_doc(RESULT), "from_a_newer_writer": 1}) == back


def test_a_recording_reads_back_in_order_and_a_cut_tail_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl.gz"
    rec = Recorder(path, "version: sloguard/v1\n", 100.0, {"fault": "overload"})
    rec.page("t", 101.0, b"llamacpp:requests_deferred 3\n")
    rec.host(101.5, [Sample("sloguard_process_cpu_wait_seconds_total", {"process": "engine"}, 2.0)])
    rec.drain(102.0, [RESULT], [("t", 101.9)], [RESULT], [("t", "ab", 101.95, 48)])
    rec.drain(102.1, [], [], [], [])  # nothing drained: nothing written
    rec.evaluate(102.5)
    rec.close([{"t": 101.0, "fault": "overload", "phase": "start"}], {"expected": "capacity"})
    events = read_events(path)
    assert [e["kind"] for e in events] == ["header", "page", "host", "drain", "evaluate", "mark", "meta"]
    assert drain_of(events[3]).results[0].head_raw_s == 1.25 and len(events[4]["load"]) == 3
    assert marks(events)[0]["phase"] == "start" and meta(events) == {"fault": "overload", "expected": "capacity"}
    data = path.read_bytes()
    (tmp_path / "cut.jsonl.gz").write_bytes(data[: len(data) - 40])
    cut = read_events(tmp_path / "cut.jsonl.gz")
    assert 1 <= len(cut) < len(events) and cut[0]["kind"] == "header"
    with gzip.open(tmp_path / "x.gz", "wb") as fh:
        fh.write(b'{"kind": "page"}\n')
    try:
        read_events(tmp_path / "x.gz")
    except ValueError as exc:
        assert "not a sloguard recording" in str(exc)
    else:
        raise AssertionError("a file without a header was read")
