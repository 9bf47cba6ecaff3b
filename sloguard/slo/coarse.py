"""Warn when a server-side SLO threshold falls inside a coarse engine bucket (interpolation can be 30–50% off)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sloguard.histogram import coarse_bucket_warning
from sloguard.model import ServerView
from sloguard.slo.model import SLO

log = logging.getLogger("sloguard.slo")


class BucketAdvisor:
    """Check each server SLO objective against the bucket bounds the engine actually exports; warn once each."""

    def __init__(self) -> None:
        self.warnings: dict[tuple[str, str, float], str] = {}

    def check(self, view: ServerView, slos: Sequence[SLO]) -> list[str]:
        """Return (and log) warnings not given before for this scrape's target."""
        new: list[str] = []
        for slo in slos:
            if slo.source != "server" or slo.target != view.target:
                continue
            for o in slo.objectives:
                key = (slo.name, o.metric, o.threshold)
                bounds = next((h.buckets for mv in view.models.values() if (h := mv.histograms.get(o.metric))), None)
                if key in self.warnings or bounds is None:
                    continue
                warning = coarse_bucket_warning([le for le, _ in bounds], o.threshold)
                if warning is not None:
                    self.warnings[key] = f"slo {slo.name} objective {o.metric} p{o.percentile:g}: {warning}"
                    log.warning(self.warnings[key])
                    new.append(self.warnings[key])
        return new
