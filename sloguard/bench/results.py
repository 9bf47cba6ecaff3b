"""Write RESULTS.jsonl: the header at once, then each stage atomically (a crash loses at most one stage).

Each append copies the file as it stands into a temporary file beside it, adds the new lines, fsyncs and
renames it over the original, so a reader (or a crash) sees either the old or the new file, never half a
stage; memory stays flat however long the run.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def _clean(value: Any) -> Any:
    """Replace non-finite floats (JSON has none) with None, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def line(row: Mapping[str, Any]) -> bytes:
    """Return one JSON line (compact, keys in insertion order, no NaN/Infinity)."""
    return json.dumps(_clean(row), separators=(",", ":"), allow_nan=False).encode() + b"\n"


class ResultsFile:
    """An append-only results file whose every append is atomic."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._tmp = self.path.with_name(f".{self.path.name}.tmp")

    def start(self, header: Mapping[str, Any]) -> None:
        """Replace any existing file by one holding only the header; OSError names the path."""
        self._write([line(header)], keep=False)

    def append(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append rows atomically."""
        self._write([line(r) for r in rows], keep=True)

    def _write(self, lines: list[bytes], keep: bool) -> None:
        with self._tmp.open("wb") as out:
            if keep:
                with self.path.open("rb") as old:
                    shutil.copyfileobj(old, out, 1 << 20)
            out.writelines(lines)
            out.flush()
            os.fsync(out.fileno())
        os.replace(self._tmp, self.path)
