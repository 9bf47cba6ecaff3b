"""`sloguard check --online` binds the listen address as `run` would and says whether it is free."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from sloguard.cli import main


def test_busy_and_free_listen_addresses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cfg = tmp_path / "c.yaml"
        cfg.write_text(f'version: sloguard/v1\nlisten: "127.0.0.1:{port}"\n')
        assert main(["check", "-c", str(cfg), "--online"]) == 1
        assert f"listen: cannot listen on 127.0.0.1:{port}: address already in use" in capsys.readouterr().out
    cfg.write_text('version: sloguard/v1\nlisten: "127.0.0.1:0"\n')
    assert main(["check", "-c", str(cfg), "--online"]) == 0
    assert "listen: 127.0.0.1:0: free" in capsys.readouterr().out
    assert main(["check", "-c", str(cfg)]) == 0 and "listen:" not in capsys.readouterr().out  # offline: no bind
