"""TLS, mTLS and bcrypt basic auth from an exporter-toolkit web config, checked with curl."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from support.procs import Proc, free_port, start_daemon, wait_until
from support.tls import pki

pytestmark = pytest.mark.e2e


def _config(port: int, state: Path) -> str:
    return f'version: sloguard/v1\nlisten: "127.0.0.1:{port}"\nstate_dir: "{state}"\nevaluation_interval: 1s\n'


@pytest.fixture(scope="module")
def tls_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, Path]]:
    if shutil.which("curl") is None:
        raise AssertionError("curl is required (scripts/setup.sh installs it)")
    d = tmp_path_factory.mktemp("tls")
    pki(d)
    hashed = bcrypt.hashpw(b"correct horse", bcrypt.gensalt(rounds=6)).decode()
    (d / "web.yml").write_text(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS12\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
        f"basic_auth_users:\n  prom: '{hashed}'\n")
    proc = start_daemon(d, _config(free_port(), d / "state"), extra=("--web.config.file", str(d / "web.yml")))
    yield proc, d
    proc.stop()


def _curl(d: Path, port: int, *args: str) -> tuple[int, str]:
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(d / "ca.crt"),
                          *args, f"https://127.0.0.1:{port}/-/healthy"], capture_output=True, text=True, check=False)
    code = int(out.stdout or "0")
    return code, out.stderr


def test_mtls_and_basic_auth(tls_daemon: tuple[Proc, Path]) -> None:
    proc, d = tls_daemon
    client = ("--cert", str(d / "client.crt"), "--key", str(d / "client.key"))
    wait_until(lambda: _curl(d, proc.port, *client, "-u", "prom:correct horse")[0] == 200, 15, "TLS health")
    assert _curl(d, proc.port, *client, "-u", "prom:wrong")[0] == 401
    assert _curl(d, proc.port, *client, "-u", "nobody:correct horse")[0] == 401
    assert _curl(d, proc.port, *client)[0] == 401
    # Without a client certificate the TLS handshake itself is refused (curl reports code 000).
    assert _curl(d, proc.port, "-u", "prom:correct horse")[0] == 0
    # TLS 1.1 is below min_version.
    assert _curl(d, proc.port, *client, "-u", "prom:correct horse", "--tls-max", "1.1")[0] == 0


def test_unknown_user_and_wrong_password_get_identical_answers(tls_daemon: tuple[Proc, Path]) -> None:
    proc, d = tls_daemon
    client = ["--cert", str(d / "client.crt"), "--key", str(d / "client.key")]
    bodies = []
    for cred in ("prom:wrong", "nobody:wrong"):
        out = subprocess.run(["curl", "-s", "-i", "--cacert", str(d / "ca.crt"), *client, "-u", cred,
                              f"https://127.0.0.1:{proc.port}/metrics"], capture_output=True, text=True, check=False)
        lines = [ln for ln in out.stdout.splitlines() if not ln.lower().startswith(("date:", "server:"))]
        bodies.append(lines)
    assert bodies[0] == bodies[1]
    assert bodies[0][0].startswith("HTTP/1.1 401")
