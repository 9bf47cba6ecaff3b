"""Read one GPU's NVML fields into families: the FIELDS table, memory (v2), field values, clock events.

Each reader returns the readings the health check needs (keyed by fields.Field.key); absent values are
simply not exported, never exported as 0 or as NVML's sentinels.
"""

from __future__ import annotations

from typing import Any

from sloguard.families import Families
from sloguard.gpu import families as gf
from sloguard.gpu import fields as nf
from sloguard.gpu.reader import GPU, NVMLReader


def read_fields(rd: NVMLReader, g: GPU, fams: Families, table: tuple[nf.Field, ...]) -> dict[str, float]:
    """Export every table field of one GPU (one NVML call per distinct getter+args); return keyed readings."""
    key, readings = {"uuid": g.uuid}, {}
    results: dict[tuple[str, tuple[str, ...]], Any] = {}
    for f in table:
        call = (f.getter, f.args)
        if call not in results:
            consts = [rd.constant(a) for a in f.args]
            results[call] = None if None in consts else rd.get(f.getter, g.handle, *consts)
        v = results[call]
        if v is not None and f.attr:
            v = getattr(v, f.attr)
        elif v is not None and f.item is not None:
            v = v[f.item]
        if v is None or v in nf.SENTINELS or v in f.absent:
            continue
        value = float(v) * f.scale
        fams.add(f.metric, f.kind, f.help, key | dict(f.labels), value)
        if f.key:
            readings[f.key] = value
    return readings


def read_memory(rd: NVMLReader, g: GPU, fams: Families, labels: dict[str, str], prefix: str = "sloguard_gpu_") -> None:
    """Export used/reserved/free/total from the v2 struct, or used/free/total from v1 on older drivers."""
    version = rd.constant(nf.MEMORY_VERSION)
    mem = rd.get("nvmlDeviceGetMemoryInfo", g.handle, version) if version is not None else None
    if mem is None:
        mem = rd.get("nvmlDeviceGetMemoryInfo", g.handle)  # v1: `used` includes the reserved memory
        version = None
    if mem is None:
        return
    for metric, attr, doc in nf.MEMORY_FIELDS:
        if attr == "reserved" and version is None:
            continue
        fams.add(metric.replace("sloguard_gpu_", prefix), "gauge", doc, labels, float(getattr(mem, attr)))


def nvlink_count(rd: NVMLReader, g: GPU) -> int:
    """Return how many NVLink links this GPU has (0 where NVLink is not supported)."""
    fid = rd.constant(nf.NVLINK_COUNT)
    got = rd.field_values(g, [(fid, 0)]) if fid is not None else {}
    return int(got.get((fid, 0), 0))


def read_field_values(rd: NVMLReader, g: GPU, fams: Families, links: int) -> None:
    """Export the FIELD_VALUES table with one nvmlDeviceGetFieldValues call (per link where per_link)."""
    wanted: list[tuple[nf.FieldValue, int, int]] = []
    for fv in nf.FIELD_VALUES:
        fid = rd.constant(fv.field)
        if fid is not None:
            wanted += [(fv, fid, link) for link in (range(links) if fv.per_link else (0,))]
    got = rd.field_values(g, [(fid, scope) for _, fid, scope in wanted])
    for fv, fid, scope in wanted:
        value = got.get((fid, scope))
        if value is not None:
            labels = {"uuid": g.uuid} | ({"link": str(scope)} if fv.per_link else {}) | dict(fv.labels)
            fams.add(fv.metric, fv.kind, fv.help, labels, value)


def read_clock_events(rd: NVMLReader, g: GPU, fams: Families) -> int | None:
    """Export the active clock-event reasons as 0/1; return the raw bitmask (None when unsupported)."""
    getter = next((n for n in nf.CLOCK_EVENT_GETTERS if hasattr(rd.mod, n)), "")
    mask = rd.get(getter, g.handle) if getter else None
    if mask is None:
        return None
    for reason, active in nf.decode_clock_events(int(mask)):
        fams.put(gf.CLOCK_EVENT, {"uuid": g.uuid, "reason": reason}, active)
    return int(mask)
