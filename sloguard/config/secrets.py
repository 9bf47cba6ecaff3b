"""Read secrets from files or environment variables; values never enter logs or errors."""

from __future__ import annotations

import os

from sloguard.config.files import FileError, read_text

SECRET_MAX_BYTES = 64 * 1024


class SecretError(Exception):
    """A secret could not be read; the message names the source, never the value."""


def read_secret(file: str | None, env: str | None) -> str | None:
    """Return the secret from `file` (trailing newline stripped) or the env var `env`; None if neither is set."""
    if file:
        try:
            value = read_text(file, SECRET_MAX_BYTES, quote_bytes=False).strip()
        except FileError as exc:
            raise SecretError(f"cannot read secret file {file}: {exc.problem.removeprefix('cannot read: ')}") from None
        if not value:
            raise SecretError(f"secret file {file} is empty")
        return value
    if env:
        value = os.environ.get(env, "").strip()
        if not value:
            raise SecretError(f"environment variable {env} is not set or empty")
        return value
    return None
