"""Snapshot merging and caching; web-config auth answers the same for unknown users and wrong passwords."""

from __future__ import annotations

import base64
from pathlib import Path

import bcrypt
import pytest
from prometheus_client.core import GaugeMetricFamily

from sloguard.config.load import ConfigError
from sloguard.snapshot import Snapshot
from sloguard.web.webconfig import load_web_config


def _gauge(name: str, label: str, value: float) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, "doc", labels=["t"])
    g.add_metric([label], value)
    return g


def test_same_named_families_from_parts_are_merged() -> None:
    snap = Snapshot()
    snap.put("a", [_gauge("sloguard_x", "1", 1)])
    snap.put("b", [_gauge("sloguard_x", "2", 2)])
    text = snap.render().decode()
    assert text.count("# TYPE sloguard_x gauge") == 1
    assert 'sloguard_x{t="1"} 1.0' in text and 'sloguard_x{t="2"} 2.0' in text


def test_render_is_cached_until_the_next_put_and_drop_removes() -> None:
    snap = Snapshot()
    snap.put("a", [_gauge("sloguard_x", "1", 1)])
    first = snap.render()
    assert snap.render() is first
    snap.put("a", [_gauge("sloguard_x", "1", 5)])
    assert b"5.0" in snap.render()
    snap.drop("a")
    assert b"sloguard_x" not in snap.render()
    assert snap.render(openmetrics_format=True).endswith(b"# EOF\n")


def test_samples_are_plain_values() -> None:
    snap = Snapshot()
    snap.put("a", [_gauge("sloguard_x", "1", 3)])
    [s] = snap.samples()
    assert (s.name, dict(s.labels), s.value) == ("sloguard_x", {"t": "1"}, 3.0)


def _basic(user: str, pw: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()


def test_basic_auth_with_bcrypt(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    f = tmp_path / "web.yml"
    f.write_text(f"basic_auth_users:\n  alice: '{hashed}'\n")
    wc = load_web_config(f)
    assert wc.check_header(_basic("alice", "s3cret"))
    assert wc.check_header(_basic("alice", "s3cret"))  # cached path
    assert not wc.check_header(_basic("alice", "wrong"))
    assert not wc.check_header(_basic("mallory", "s3cret"))
    assert not wc.check_header(None)
    assert not wc.check_header("Basic !!!notbase64")
    assert not wc.check_header("Bearer abc")
    assert not wc.check_header(_basic("alice", "x" * 80))  # bcrypt refuses > 72 bytes: still just a 401
    assert not wc.check_header(_basic("nobody", "x" * 80))


@pytest.mark.parametrize(("text", "expected"), [
    ("basic_auth_users:\n  bob: plaintext\n", "basic_auth_users.bob: must be a bcrypt hash"),
    ("tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n", "tls_server_config: "),
    ("tls_server_config:\n  cert_file: a\n", "tls_server_config.key_file: required key is missing"),
    ("unknown: 1\n", "unknown: unknown key"),
    ("basic_auth_users:\n  bob: '$2b$garbage'\n", "basic_auth_users.bob: must be a bcrypt hash"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n",
     "tls_server_config.client_ca_file: required with client_auth_type RequireAndVerifyClientCert"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n",
     "tls_server_config.client_auth_type: RequireAnyClientCert is not supported"),
    ("http_server_config:\n  headers: {X-Frame-Options: deny}\n  brotli: true\n",
     "http_server_config.brotli: unknown key"),
])
def test_bad_web_config_is_a_clear_error(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "web.yml"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_web_config(f)
    assert info.value.errors[0].startswith(expected)
