"""A service's worst replicas as the incident model shows them (pure).

Server SLOs: from the SLO's per-replica counts over the breach window (sloguard.slo.replicas): a replica's share of
the bad requests on the objective where it carries the most of them, with its own quantile there. Any SLO: what the
diagnosis's replica_outlier evidence says of a replica (sloguard.diagnose.replicas), so a probe SLO whose slowness
one replica causes names it too. Worst first: the largest share, then the fastest own burn; at most SHOWN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sloguard.diagnose.replicas import SIGNAL
from sloguard.incident.model import ReplicaView
from sloguard.slo.replicas import ReplicaStatus
from sloguard.slo.result import SLOStatus
from sloguard.slo.status import seconds

SHOWN = 3


def outliers(verdict: Mapping[str, Any] | None) -> dict[str, str]:
    """Return replica -> what the verdict's replica_outlier evidence says of it ("decode mean 310 ms vs 95 ms")."""
    out: dict[str, str] = {}
    for e in (verdict or {}).get("evidence") or []:
        if isinstance(e, Mapping) and e.get("signal") == SIGNAL and e.get("detail"):
            for part in str(e["detail"]).split("; "):  # "replica r1 of 3: decode mean ..., KV cache ..."
                head, sep, text = part.partition(": ")
                name, of, _ = head.removeprefix("replica ").rpartition(" of ")
                if sep and of and head.startswith("replica "):
                    out[name] = text
    return out


def _burn(r: ReplicaStatus) -> float:
    return r.bad / r.requests / (1.0 - r.percentile / 100.0) if r.requests > 0 else 0.0


def _worst(rows: Sequence[ReplicaStatus], totals: Mapping[tuple[str, float], float]) -> tuple[ReplicaStatus, float]:
    """Return the replica's objective where it carries the largest share of the bad requests, and that share."""
    def share(r: ReplicaStatus) -> float:
        total = totals.get((r.metric, r.percentile), 0.0)
        return r.bad / total if total > 0 else 0.0
    best = max(rows, key=lambda r: (share(r), _burn(r)))
    return best, share(best)


def _view(best: ReplicaStatus, share: float, note: str) -> ReplicaView:
    worst = (f"{best.metric} p{best.percentile:g} {seconds(best.value)} "
             f"{'>' if (best.value or 0.0) > best.threshold else '≤'} {seconds(best.threshold)}")
    text = (f"{best.replica}: {share:.0%} of the bad requests ({best.bad:.0f} of its {best.requests:.0f}), "
            f"{worst}" + (f"; {note}" if note else ""))
    return ReplicaView(best.replica, text, int(best.requests), best.bad, share, worst, note)


def worst_replicas(status: SLOStatus, verdict: Mapping[str, Any] | None) -> tuple[ReplicaView, ...]:
    """Return the replicas that spend the SLO's budget or that the diagnosis names, worst first."""
    notes = outliers(verdict)
    totals: dict[tuple[str, float], float] = {}
    per: dict[str, list[ReplicaStatus]] = {}
    for r in status.replicas:
        totals[(r.metric, r.percentile)] = totals.get((r.metric, r.percentile), 0.0) + r.bad
        per.setdefault(r.replica, []).append(r)
    ranked = sorted(((_worst(rows, totals), name) for name, rows in per.items()),
                    key=lambda x: (-x[0][1], -_burn(x[0][0]), x[1]))
    views = [_view(best, share, notes.get(name, "")) for (best, share), name in ranked
             if best.bad > 0 or name in notes]
    shown = {v.name for v in views}
    views += [ReplicaView(name, f"{name}: {note}", outlier=note) for name, note in sorted(notes.items())
              if name not in shown]
    return tuple(views[:SHOWN])
