"""Traces stay out of the processes that do not use them: no protobuf or OpenTelemetry SDK import."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["sloguard.daemon", "sloguard.probes.worker"])
def test_no_protobuf_or_sdk_import_without_traces(module: str) -> None:
    code = (f"import sys, {module}; bad = [m for m in sys.modules if m.startswith(('google.protobuf', "
            "'opentelemetry'))]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
