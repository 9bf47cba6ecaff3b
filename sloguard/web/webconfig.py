"""The exporter-toolkit web config file (`--web.config.file`): TLS, mTLS and bcrypt basic auth."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import bcrypt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sloguard.config.files import FileError, kind_of, load_yaml
from sloguard.config.load import ConfigError, errors_from_validation
from sloguard.web.basicauth import BasicAuth

_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
             "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
ClientAuth = Literal["NoClientCert", "RequestClientCert", "RequireAnyClientCert",
                     "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"]


class TLSServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cert_file: str
    key_file: str
    client_auth_type: ClientAuth = "NoClientCert"
    client_ca_file: str | None = None
    min_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS12"
    max_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] | None = None


class HTTPServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    http2: bool = True  # accepted for compatibility; aiohttp serves HTTP/1.1
    headers: dict[str, str] = Field(default_factory=dict)


class WebConfigSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tls_server_config: TLSServerConfig | None = None
    basic_auth_users: dict[str, str] = Field(default_factory=dict)
    http_server_config: HTTPServerConfig = Field(default_factory=HTTPServerConfig)


@dataclass
class WebConfig:
    """Loaded web config: an SSL context (or None) and the bcrypt hashes of allowed users."""

    ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    path: str = ""  # the file it came from ("" when none was given)
    client_certs: bool = False  # a verified client certificate is required
    auth: BasicAuth = field(init=False)

    def __post_init__(self) -> None:
        self.auth = BasicAuth(self.users)

    @property
    def auth_required(self) -> bool:
        return bool(self.users)

    @property
    def protected(self) -> bool:
        """Return True when the listener serves TLS or asks for credentials."""
        return self.ssl_context is not None or self.auth_required

    @property
    def authenticates(self) -> bool:
        """Return True when every request must prove who sent it (basic auth or a verified client certificate)."""
        return self.auth_required or self.client_certs

    def check_header(self, header: str | None) -> bool:
        """Return True if an Authorization header carries a valid user and password (blocking: bcrypt on a miss)."""
        return True if not self.users else self.auth.check(header)


def _ssl_context(tls: TLSServerConfig, base: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _VERSIONS[tls.min_version]
    if tls.max_version:
        ctx.maximum_version = _VERSIONS[tls.max_version]
    ctx.load_cert_chain(base / tls.cert_file, base / tls.key_file)
    if tls.client_auth_type != "NoClientCert":
        if tls.client_ca_file:
            ctx.load_verify_locations(base / tls.client_ca_file)
        strict = tls.client_auth_type == "RequireAndVerifyClientCert"
        ctx.verify_mode = ssl.CERT_REQUIRED if strict else ssl.CERT_OPTIONAL
    return ctx


def _is_bcrypt(hashed: str) -> bool:
    if not hashed.startswith(("$2a$", "$2b$", "$2y$")):
        return False
    try:
        bcrypt.checkpw(b"probe", hashed.encode())
    except ValueError:
        return False
    return True


def _check_client_auth(tls: TLSServerConfig) -> list[str]:
    if tls.client_auth_type in ("RequestClientCert", "RequireAnyClientCert"):
        # Python's ssl verifies every certificate a client presents; exporter-toolkit's unverified modes
        # cannot be reproduced, and silently verifying would be a different policy.
        return [f"tls_server_config.client_auth_type: {tls.client_auth_type} is not supported; use "
                "RequireAndVerifyClientCert or VerifyClientCertIfGiven"]
    if tls.client_auth_type in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert") and not tls.client_ca_file:
        return [f"tls_server_config.client_ca_file: required with client_auth_type {tls.client_auth_type}"]
    return []


def load_web_config(path: str | Path | None) -> WebConfig:
    """Load and check a web config file (paths inside are relative to it); raise ConfigError on any problem."""
    if path is None:
        return WebConfig()
    p = Path(path)
    try:
        data = load_yaml(p) or {}
        if not isinstance(data, dict):
            raise FileError(p, f"must be a YAML mapping (exporter-toolkit web config), got {kind_of(data)}")
        spec = WebConfigSpec.model_validate(data)
    except FileError as exc:
        raise ConfigError.from_file(exc) from None
    except ValidationError as exc:
        raise ConfigError(errors_from_validation(exc), str(p)) from None
    ctx = None
    if spec.tls_server_config is not None:
        problems = _check_client_auth(spec.tls_server_config)
        if problems:
            raise ConfigError(problems, str(p))
        try:
            ctx = _ssl_context(spec.tls_server_config, p.parent)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError([f"tls_server_config: {exc}"], str(p)) from None
    users = {}
    for user, hashed in spec.basic_auth_users.items():
        if not _is_bcrypt(hashed):
            raise ConfigError([f"basic_auth_users.{user}: must be a bcrypt hash"], str(p))
        users[user] = hashed.encode()
    tls = spec.tls_server_config
    return WebConfig(ssl_context=ctx, users=users, headers=dict(spec.http_server_config.headers), path=str(p),
                     client_certs=tls is not None and tls.client_auth_type == "RequireAndVerifyClientCert")
