"""SSE splitter: events split across reads, packed into one read, every line ending, comments, truncation."""

from __future__ import annotations

import pytest

from sloguard.probes.sse import SSESplitter, split

CASES = [
    # (name, reads, expected [(data, stamp index)], pending at end)
    ("one event one read", [b"data: a\n\n"], [("a", 0)], False),
    ("packed into one read", [b"data: a\n\ndata: b\n\ndata: [DONE]\n\n"], [("a", 0), ("b", 0), ("[DONE]", 0)],
     False),
    ("split across reads", [b"da", b"ta: {\"x\"", b": 1}\n", b"\n"], [('{"x": 1}', 3)], False),
    ("crlf endings", [b"data: a\r\n\r\ndata: b\r\n\r\n"], [("a", 0), ("b", 0)], False),
    ("crlf split between reads", [b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"], [("a", 1), ("b", 2)], False),
    ("bare cr endings", [b"data: a\r\rdata: b\r\r"], [("a", 0), ("b", 0)], False),
    ("comments skipped", [b": keep-alive\n\n:ping\ndata: a\n\n"], [("a", 0)], False),
    ("multi-line data joined", [b"data: a\ndata: b\n\n"], [("a\nb", 0)], False),
    ("no space after colon", [b"data:a\n\n"], [("a", 0)], False),
    ("other fields ignored", [b"id: 7\nretry: 10\ndata: a\n\n"], [("a", 0)], False),
    ("blank lines without data", [b"\n\n\n"], [], False),
    ("truncated mid-event", [b"data: a\n\ndata: {\"par"], [("a", 0)], True),
    ("truncated after data line", [b"data: a\n"], [], True),
    ("utf-8 split across reads", [b"data: \xe2\x82", b"\xac\n\n"], [("\u20ac", 1)], False),
]


@pytest.mark.parametrize(("name", "reads", "expected", "pending"), CASES, ids=[c[0] for c in CASES])
def test_split(name: str, reads: list[bytes], expected: list[tuple[str, int]], pending: bool) -> None:
    stamps = [1000 * (i + 1) for i in range(len(reads))]
    events, unfinished = split(zip(stamps, reads, strict=True))
    assert [(e.data, e.t_ns) for e in events] == [(d, stamps[i]) for d, i in expected]
    assert unfinished is pending


def test_event_field_kept() -> None:
    events = SSESplitter().feed(b"event: error\ndata: {}\n\n", 5)
    assert (events[0].event, events[0].data) == ("error", "{}")


def test_byte_at_a_time_equals_one_read() -> None:
    body = b": c\r\ndata: a\r\n\r\ndata: b\ndata: c\n\ndata: [DONE]\n\n"
    whole, _ = split([(1, body)])
    bytewise, pending = split((i, body[i : i + 1]) for i in range(len(body)))
    assert [e.data for e in bytewise] == [e.data for e in whole] == ["a", "b\nc", "[DONE]"]
    assert not pending
