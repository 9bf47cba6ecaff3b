"""Skip everything here unless NVML sees an NVIDIA GPU; canary tests also need torch with CUDA."""

from __future__ import annotations

import pytest


def _nvml_gpus() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver: no GPU for these tests
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


NVML_GPUS = _nvml_gpus()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/gpu as `gpu` and skip it where NVML sees no GPU."""
    skip = pytest.mark.skip(reason="no NVIDIA GPU (NVML init failed or reports no device)")
    for item in items:
        if "tests/gpu/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
            if NVML_GPUS == 0:
                item.add_marker(skip)
