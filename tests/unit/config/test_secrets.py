"""Secrets come from files or env vars; errors name the source, never the value."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sloguard.config.load import ConfigError, parse_config
from sloguard.config.secrets import read_secrets
from sloguard.log import LogfmtFormatter, register_secret


def _cfg(**target: str) -> dict[str, object]:
    t = {"name": "chat", "api_url": "http://127.0.0.1:1", **target}
    return {"version": "sloguard/v1", "targets": [t]}


def test_secret_from_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "key"
    f.write_text("sk-file-secret\n")
    assert read_secrets(parse_config(_cfg(api_key_file=str(f)))).targets == {"chat": "sk-file-secret"}
    monkeypatch.setenv("CHAT_KEY", "sk-env-secret")
    assert read_secrets(parse_config(_cfg(api_key_env="CHAT_KEY"))).targets == {"chat": "sk-env-secret"}


def test_missing_secret_names_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE", raising=False)
    with pytest.raises(ConfigError) as info:
        read_secrets(parse_config(_cfg(api_key_env="NOPE")))
    assert info.value.errors == ["targets[0].api_key_env: environment variable NOPE is not set or empty"]
    with pytest.raises(ConfigError) as info:
        read_secrets(parse_config(_cfg(api_key_file=str(tmp_path / "absent"))))
    assert info.value.errors[0].startswith("targets[0].api_key_file: cannot read secret file ")


def test_registered_secrets_are_redacted_from_logs() -> None:
    register_secret("xoxb-123-abc-def")
    rec = logging.LogRecord("t", logging.INFO, __file__, 1, "token is %s", ("xoxb-123-abc-def",), None)
    rec.url = "https://hooks.example/xoxb-123-abc-def"
    out = LogfmtFormatter().format(rec)
    assert "xoxb-123-abc-def" not in out
    assert "<redacted>" in out


def test_exceptions_are_logged_with_their_traceback_redacted() -> None:
    register_secret("sk-trace-secret-42")
    try:
        raise RuntimeError("failed with sk-trace-secret-42")
    except RuntimeError:
        import sys

        rec = logging.LogRecord("t", logging.ERROR, __file__, 1, "step failed", (), sys.exc_info())
    out = LogfmtFormatter().format(rec)
    assert "traceback=" in out and "test_exceptions_are_logged_with_their_traceback_redacted" in out
    assert "sk-trace-secret-42" not in out
