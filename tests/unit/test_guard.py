"""The process guard: a closed stdout, Ctrl-C and an escaped exception each end in one line and a known code."""

from __future__ import annotations

import pytest

from sloguard.guard import EXIT_BUG, EXIT_INTERRUPT, EXIT_PIPE, run_guarded


def _raise(exc: BaseException) -> int:
    raise exc


def test_passes_the_code_through() -> None:
    assert run_guarded(lambda: 3) == 3


@pytest.mark.parametrize(("exc", "code", "line"), [
    (KeyboardInterrupt(), EXIT_INTERRUPT, "sloguard: interrupted"),
    (RuntimeError("boom\nsecond line"), EXIT_BUG, "sloguard: internal error: RuntimeError: boom second line"),
])
def test_one_line(exc: BaseException, code: int, line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_guarded(lambda: _raise(exc)) == code
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1


def test_broken_pipe_is_quiet(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sloguard.guard._silence_stdout", lambda: None)
    assert run_guarded(lambda: _raise(BrokenPipeError())) == EXIT_PIPE
    assert capsys.readouterr().err == ""


def test_traceback_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOGUARD_TRACEBACK", "1")
    with pytest.raises(RuntimeError):
        run_guarded(lambda: _raise(RuntimeError("x")))
