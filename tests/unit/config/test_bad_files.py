"""Every unreadable, undecodable or non-YAML file gets one `PATH: why` line and exit 2, never a traceback."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from sloguard.cli import main
from sloguard.config.files import FileError, load_yaml, read_text
from sloguard.run import serve

GOOD = """version: sloguard/v1
state_dir: {state}
targets: [{{name: chat, api_url: "http://127.0.0.1:1", model: m, api_key_file: {secret}}}]
"""

# name -> (how to make the file, the problem its line must state)
BAD: dict[str, tuple[Callable[[Path], None], str]] = {
    "latin1": (lambda p: p.write_bytes(b"version: sloguard/v1\nlisten: \xe9t\xe9\n"),
               "not UTF-8 text (byte 0xe9 at offset 29)"),
    "utf16": (lambda p: p.write_bytes("version: sloguard/v1\n".encode("utf-16")), "is UTF-16 text"),
    "ff-fe-binary": (lambda p: p.write_bytes(b"\xff\xfe\x00\x01\x02garbage"), "is UTF-16 text"),
    "elf": (lambda p: p.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))), "binary file (NUL byte"),
    "png": (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n"), "not UTF-8 text (byte 0x89 at offset 0)"),
    "missing": (lambda p: None, "cannot read: No such file or directory"),
    "directory": (lambda p: p.mkdir(), "is a directory"),
    "bad-yaml": (lambda p: p.write_text("version: sloguard/v1\ntargets: [\n"), "not valid YAML: line 3, column 1"),
    "control-char": (lambda p: p.write_text("version: sloguard/v1\x07\n"), "unacceptable character '\\x07'"),
    "tab-indent": (lambda p: p.write_text("targets:\n\t- name: a\n"), "not valid YAML: line 2, column 1"),
    "scalar": (lambda p: p.write_text("just some text\n"), "must be a YAML mapping"),
    "list": (lambda p: p.write_text("- a\n- b\n"), "must be a YAML mapping"),
    "empty": (lambda p: p.write_text(""), "got an empty file"),
}


def _one_line(err: str, path: Path, problem: str) -> None:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{path}: "), err
    assert problem in lines[0], err


@pytest.mark.parametrize("case", sorted(BAD))
def test_check_config_file(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make, problem = BAD[case]
    path = tmp_path / "sloguard.yaml"
    make(path)
    assert main(["check", "-c", str(path)]) == 2
    _one_line(capsys.readouterr().err, path, problem)


@pytest.mark.parametrize("case", ["latin1", "elf", "directory", "bad-yaml", "missing"])
def test_run_config_file(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make, problem = BAD[case]
    path = tmp_path / "sloguard.yaml"
    make(path)
    assert asyncio.run(serve(str(path))) == 2
    _one_line(capsys.readouterr().err, path, problem)


def _good(tmp_path: Path, secret: bytes = b"sk-test-123\n") -> Path:
    (tmp_path / "key").write_bytes(secret)
    cfg = tmp_path / "good.yaml"
    cfg.write_text(GOOD.format(state=tmp_path / "state", secret=tmp_path / "key"))
    return cfg


@pytest.mark.parametrize("case", ["latin1", "utf16", "elf", "directory", "bad-yaml", "scalar", "list"])
def test_web_config_file(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make, problem = BAD[case]
    web = tmp_path / "web.yaml"
    make(web)
    assert asyncio.run(serve(str(_good(tmp_path)), str(web), "127.0.0.1:0")) == 2
    _one_line(capsys.readouterr().err, web, problem.replace("sloguard keys", ""))


@pytest.mark.parametrize(("secret", "problem"), [
    (b"\xffsk-secret-value", "not UTF-8 text (a byte at offset 0)"),
    (b"sk-\x00secret", "binary file (NUL byte at offset 3)"),
])
def test_secret_file_is_named_and_its_bytes_are_not(secret: bytes, problem: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _good(tmp_path, secret)
    assert main(["check", "-c", str(cfg), "--secrets"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "sk-" not in err
    assert f"targets[0].api_key_file: cannot read secret file {tmp_path / 'key'}: {problem}" in err
    assert "0xff" not in err


@pytest.mark.parametrize("case", ["latin1", "elf", "directory", "missing"])
def test_results_file(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make, problem = BAD[case]
    results = tmp_path / "results.jsonl"
    make(results)
    assert main(["evaluate", "-c", str(_good(tmp_path)), "--results", str(results), "--json"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"{results}: {problem}" in err


def test_reader_limits_and_bom(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert load_yaml(p) == {"a": 1}  # a UTF-8 BOM is fine
    p.write_bytes(b"x" * 101)
    with pytest.raises(FileError, match="larger than 100 bytes"):
        read_text(p, limit=100)
