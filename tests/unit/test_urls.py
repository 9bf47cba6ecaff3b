"""One reading of user-written URLs: `api_url` with or without `/v1`, addresses without a scheme, listen addresses."""

from __future__ import annotations

import pytest

from sloguard.urls import api_endpoint, api_root, with_scheme
from sloguard.web.listen import local_url


@pytest.mark.parametrize(("api_url", "root"), [
    ("http://h:8000", "http://h:8000"),
    ("http://h:8000/", "http://h:8000"),
    ("http://h:8000/v1", "http://h:8000"),  # issue 46: check --online asked /v1/v1/models
    ("http://h:8000/v1/", "http://h:8000"),
    ("https://gw.example/llm/v1", "https://gw.example/llm"),  # a path prefix is kept
    ("http://h:8000/v10", "http://h:8000/v10"),  # only the exact segment
    ("http://h:8000/api/v1x", "http://h:8000/api/v1x"),
])
def test_api_root(api_url: str, root: str) -> None:
    assert api_root(api_url) == root
    assert api_endpoint(api_url, "/v1/models") == f"{root}/v1/models"
    assert api_endpoint(api_url, "version") == f"{root}/version"


@pytest.mark.parametrize(("url", "want"), [
    ("127.0.0.1:9490", "http://127.0.0.1:9490"),
    ("localhost:9478", "http://localhost:9478"),
    (":9478", "http://127.0.0.1:9478"),
    ("http://h:1", "http://h:1"),
    ("https://h:1/", "https://h:1/"),
    ("[::1]:9478", "http://[::1]:9478"),
])
def test_with_scheme(url: str, want: str) -> None:
    assert with_scheme(url) == want


@pytest.mark.parametrize(("listen", "want"), [
    (":9478", "http://127.0.0.1:9478"),
    ("0.0.0.0:9478", "http://127.0.0.1:9478"),
    ("[::]:9478", "http://[::1]:9478"),
    ("[::1]:9490", "http://[::1]:9490"),
    ("10.0.0.5:9478", "http://10.0.0.5:9478"),
])
def test_local_url(listen: str, want: str) -> None:
    assert local_url(listen) == want
