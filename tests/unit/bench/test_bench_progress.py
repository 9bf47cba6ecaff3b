"""Live progress: one redrawn line on a terminal, plain lines per stage otherwise."""

from __future__ import annotations

import io

from helpers import rec

from sloguard.bench.progress import Progress


def test_terminal_gets_a_redrawn_status_line() -> None:
    out = io.StringIO()
    p = Progress(out, tty=True)
    p.start("stage 0 c=4", "60s")
    p.add([rec(0, ttft=0.05), rec(1, ttft=0.07), rec(2, ok=False)])
    text = out.getvalue()
    assert text.startswith("\r\x1b[2K") and "stage 0 c=4" in text and "/60s" in text
    assert "done 3" in text and "errors 1" in text and "TTFT p50 70 p95 70 ms" in text
    p.stage_line("stage 0 c=4: 3 requests")
    assert out.getvalue().endswith("\r\x1b[2Kstage 0 c=4: 3 requests\n")


def test_a_log_gets_only_the_stage_lines() -> None:
    out = io.StringIO()
    p = Progress(out, tty=False)
    p.start("stage 0 c=4", "60s")
    p.add([rec(0), rec(1)])
    assert out.getvalue() == ""
    p.stage_line("stage 0 c=4: 2 requests")
    assert out.getvalue() == "stage 0 c=4: 2 requests\n"
