"""One reading of the URLs a user writes: a target's `api_url` with or without OpenAI's `/v1`, an address without
a scheme. Every request to a target (probes, guardrail checks, `check --online`, identity, bench) builds its URL
here, so `api_url: http://host:8000/v1` and `http://host:8000` reach the same endpoints everywhere."""

from __future__ import annotations

from urllib.parse import urlsplit


def api_root(url: str) -> str:
    """Return the server's root: `api_url` without trailing slashes and without a final `/v1` path segment."""
    base = url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def api_endpoint(url: str, path: str) -> str:
    """Return `path` (e.g. "/v1/models", "/version") on the server `api_url` names."""
    return api_root(url) + "/" + path.lstrip("/")


def with_scheme(url: str, scheme: str = "http") -> str:
    """Return `url` with `scheme://` prefixed when it has none (`127.0.0.1:9490`, `:9478`, `localhost:9478`)."""
    if "://" in url:
        return url
    host = url.strip()
    if host.startswith(":"):
        host = "127.0.0.1" + host
    return f"{scheme}://{host}" if urlsplit(f"{scheme}://{host}").hostname else url


__all__ = ["api_endpoint", "api_root", "with_scheme"]
