"""Load a script of benchmarks/ as a module, as the benchmarks run it (their folder on sys.path while it loads)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load(name: str) -> ModuleType:
    """Return benchmarks/<name>.py executed as module `name`."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(ROOT / "benchmarks"))  # detection_bound imports diagnosis_retable by its bare name
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        mp.setitem(sys.modules, name, module)  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
    return module
