"""Read secrets from files or environment variables; values never enter logs or errors."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from sloguard.config.files import FileError, read_text
from sloguard.config.load import ConfigError
from sloguard.config.spec import Config
from sloguard.log import register_secret

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


@dataclass
class Secrets:
    """Secret values by owner name; registered for log redaction as they are read."""

    targets: dict[str, str] = field(default_factory=dict)
    notifiers: dict[str, str] = field(default_factory=dict)
    discovery: dict[str, str] = field(default_factory=dict)


def read_secrets(cfg: Config, strict: bool = True) -> Secrets:
    """Read every *_file / *_env secret; raise ConfigError naming each path that failed (strict), or leave out
    the ones that cannot be read (a command that only scrubs them from its output, as `report` does)."""
    out, errors = Secrets(), []
    refs: list[tuple[str, dict[str, str], str, str | None, str | None]] = []
    for i, t in enumerate(cfg.targets):
        refs.append((f"targets[{i}].api_key", out.targets, t.name, t.api_key_file, t.api_key_env))
    for i, d in enumerate(cfg.discovery):
        if d.http_sd is not None and (d.http_sd.token_file or d.http_sd.token_env):
            refs.append((f"discovery[{i}].http_sd.token", out.discovery, d.name, d.http_sd.token_file,
                         d.http_sd.token_env))
    for i, n in enumerate(cfg.notifiers):
        for key in ("token", "webhook_url", "password", "url_with_secret"):
            f, e = getattr(n, f"{key}_file", None), getattr(n, f"{key}_env", None)
            if f or e:
                refs.append((f"notifiers[{i}].{key}", out.notifiers, n.name, f, e))
    for path, into, name, f, e in refs:
        try:
            value = read_secret(f, e)
        except SecretError as exc:
            errors.append(f"{path}_{'file' if f else 'env'}: {exc}")
            continue
        if value is not None:
            register_secret(value)
            into[name] = value
    if errors and strict:
        raise ConfigError(errors)
    return out
