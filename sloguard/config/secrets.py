"""Read secrets from files or environment variables; values never enter logs or errors."""

from __future__ import annotations

import os
from pathlib import Path


class SecretError(Exception):
    """A secret could not be read; the message names the source, never the value."""


def read_secret(file: str | None, env: str | None) -> str | None:
    """Return the secret from `file` (trailing newline stripped) or the env var `env`; None if neither is set."""
    if file:
        try:
            value = Path(file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SecretError(f"cannot read secret file {file}: {exc.strerror}") from None
        if not value:
            raise SecretError(f"secret file {file} is empty")
        return value
    if env:
        value = os.environ.get(env, "").strip()
        if not value:
            raise SecretError(f"environment variable {env} is not set or empty")
        return value
    return None
