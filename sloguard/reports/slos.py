"""SLOs in the shape a bench results header holds them, so every input judges against the same thing."""

from __future__ import annotations

from typing import Any

from sloguard.slo.model import SLO


def slo_json(s: SLO) -> dict[str, Any]:
    """Return {name, objectives [{metric, percentile, threshold_s}], goodput {target, metric: s}, error_rate}."""
    gp = s.goodput
    return {"name": s.name,
            "objectives": [{"metric": o.metric, "percentile": o.percentile, "threshold_s": o.threshold}
                           for o in s.objectives],
            "goodput": None if gp is None else {"target": gp.target, **dict(gp.thresholds())},
            "error_rate": s.error_objective}
