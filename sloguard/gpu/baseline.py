"""Per-GPU canary baselines: the median of the last N runs that had the GPU to themselves and were healthy.

Keyed by GPU UUID (the CPU fallback by its model name). A change of GPU model, driver or torch version
starts the history afresh. A baseline needs MIN_RUNS runs before anything is judged against it, so one
outlier can neither set it nor move it. Baselines of older sloguard versions (first run, possibly under
contention) use another key and are ignored.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("sloguard.canary")
BASELINE_FILE = "canary_baseline.json"
MIN_RUNS = 3


@dataclass(frozen=True)
class Baseline:
    """Per-figure medians over `runs` stored runs."""

    figures: dict[str, float]
    runs: int


def key(figures: dict[str, Any]) -> str:
    """Return the baseline key: the GPU UUID, or "cpu|<model>" for the CPU fallback."""
    uuid = str(figures.get("gpu_uuid") or "")
    return uuid or f"cpu|{figures.get('gpu_name', '')}"


def identity(figures: dict[str, Any], driver: str) -> dict[str, str]:
    """Return what must stay the same for stored runs to remain comparable."""
    return {"gpu_name": str(figures.get("gpu_name", "")), "driver_version": driver,
            "torch_version": str(figures.get("torch_version", ""))}


class BaselineStore:
    """Read and write the baseline file (JSON, replaced atomically); unreadable means empty."""

    def __init__(self, path: Path, keep: int = 5, min_runs: int = MIN_RUNS) -> None:
        self.path = Path(path)
        self.keep = keep
        self.min_runs = min(min_runs, keep)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _entries(self, data: dict[str, Any], figures: dict[str, Any], driver: str) -> list[dict[str, Any]]:
        entry = data.get(key(figures))
        if not isinstance(entry, dict) or entry.get("identity") != identity(figures, driver):
            return []
        return [r for r in entry.get("runs", []) if isinstance(r, dict) and isinstance(r.get("figures"), dict)]

    def runs(self, figures: dict[str, Any], driver: str) -> list[dict[str, float]]:
        """Return the stored runs of this GPU that are still comparable (same identity)."""
        return [r["figures"] for r in self._entries(self._load(), figures, driver)]

    def get(self, figures: dict[str, Any], driver: str, names: tuple[str, ...]) -> Baseline | None:
        """Return the medians of the stored runs, or None while fewer than `min_runs` exist."""
        runs = self.runs(figures, driver)
        if len(runs) < self.min_runs:
            return None
        med = {n: statistics.median(v) for n in names if (v := [float(r[n]) for r in runs if n in r])}
        return Baseline(med, len(runs))

    def add(self, figures: dict[str, Any], driver: str, names: tuple[str, ...], now: float,
            reset: bool = False) -> bool:
        """Append this run (keeping the last `keep`); start afresh on `reset` or a new identity. False: not stored."""
        data, k = self._load(), key(figures)
        runs = [] if reset else self._entries(data, figures, driver)
        runs.append({"figures": {n: float(figures[n]) for n in names if isinstance(figures.get(n), int | float)},
                     "at": now})
        data[k] = {"identity": identity(figures, driver), "runs": runs[-self.keep:]}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("canary baseline not stored", extra={"path": str(self.path), "error": str(exc)})
            return False
        return True
