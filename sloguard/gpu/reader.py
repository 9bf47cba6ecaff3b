"""One NVML lifecycle: init, GPU identities, and getters that turn "not here" into None, noted once."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from sloguard.gpu import fields as nf

log = logging.getLogger("sloguard.nvml")
MAX_EVENTS_PER_RUN = 1000  # bounds the XID drain so a storm cannot stall a collection


@dataclass(frozen=True)
class GPU:
    """Static identity of one GPU, read once per NVML initialisation."""

    handle: Any
    index: int
    uuid: str
    name: str
    pci_bus_id: str


class NVMLReader:
    """Own one NVML initialisation; lifecycle errors propagate, field errors become None (logged once).

    A getter that answers NOT_SUPPORTED or FUNCTION_NOT_FOUND is not called again for that device until
    NVML is re-initialised, so an unsupported field costs one call per lifecycle, not one per collection.
    """

    def __init__(self, mod: ModuleType | None = None, events: bool = False) -> None:
        self._mod = mod
        self._want_events = events
        self.gpus: list[GPU] | None = None  # None: not initialised
        self.lost: list[int] = []  # indices whose handle answered GPU_IS_LOST at init
        self.system = ("", "")
        self._events: Any = None
        self._noted: set[tuple[str, int]] = set()
        self._skip: set[tuple[Any, ...]] = set()

    def module(self) -> ModuleType | None:
        """Return the NVML module (pynvml imported on first use), or None when it is not installed."""
        if self._mod is None:
            try:
                import pynvml
            except ImportError:
                return None
            self._mod = pynvml
        return self._mod

    @property
    def mod(self) -> ModuleType:
        """Return the NVML module; only valid after `module()` returned one."""
        assert self._mod is not None
        return self._mod

    @property
    def watching_events(self) -> bool:
        """Return whether XID events are being received (an event set exists)."""
        return self._events is not None

    def reason(self, code: object) -> str | None:
        """Return the lifecycle reason of an NVML error code, or None for a field-level error."""
        mod = self.mod
        return next((r for const, r in nf.LIFECYCLE_ERRORS.items() if getattr(mod, const, object()) == code), None)

    def ensure(self) -> list[GPU]:
        """Initialise NVML once per lifecycle; a GPU whose handle is lost is skipped and listed in `lost`."""
        if self.gpus is not None:
            return self.gpus
        mod = self.mod
        mod.nvmlInit()
        cuda = self.get("nvmlSystemGetCudaDriverVersion")
        self.system = (nf.text(self.get("nvmlSystemGetDriverVersion") or ""),
                       "" if cuda is None else nf.cuda_version_text(int(cuda)))
        gpus, lost = [], []
        for i in range(int(mod.nvmlDeviceGetCount())):
            try:
                h = mod.nvmlDeviceGetHandleByIndex(i)
                uuid, name = nf.text(mod.nvmlDeviceGetUUID(h)), nf.text(mod.nvmlDeviceGetName(h))
            except mod.NVMLError as exc:
                if self.reason(getattr(exc, "value", None)) != "gpu_lost":
                    raise
                lost.append(i)
                continue
            pci = self.get("nvmlDeviceGetPciInfo", h)
            gpus.append(GPU(h, i, uuid, name, "" if pci is None else nf.text(pci.busId)))
        self.gpus, self.lost = gpus, lost
        if self._want_events:
            self._events = self.get("nvmlEventSetCreate")
            for g in gpus if self._events is not None else ():
                self.get("nvmlDeviceRegisterEvents", g.handle, mod.nvmlEventTypeXidCriticalError, self._events)
        log.info("nvml initialised", extra={"gpus": len(gpus), "lost": len(lost), "driver": self.system[0]})
        return gpus

    def teardown(self) -> None:
        """Free the event set and shut NVML down; best effort, since the GPU may already be gone."""
        mod, events, was_init = self._mod, self._events, self.gpus is not None
        self.gpus, self._events = None, None
        self._skip.clear()
        if mod is None or not was_init:
            return
        try:
            if events is not None:
                mod.nvmlEventSetFree(events)
        except mod.NVMLError:
            pass
        with contextlib.suppress(mod.NVMLError):
            mod.nvmlShutdown()

    def get(self, getter: str, *args: Any) -> Any:
        """Call one NVML getter; lifecycle errors propagate, others mean "absent" (None, noted once)."""
        mod = self.mod
        fn = getattr(mod, getter, None)
        key = (getter, *(a if isinstance(a, int | str) else "seq" if isinstance(a, list) else id(a) for a in args))
        if fn is None or key in self._skip:
            return None
        try:
            value = fn(*args)
        except mod.NVMLError as exc:
            code = getattr(exc, "value", -1)
            if self.reason(code) is not None:
                raise
            if code in self._codes(nf.PERMANENT_ERRORS):
                self._skip.add(key)
            self.note(getter, code, str(exc))
            return None
        return None if isinstance(value, int) and value in nf.SENTINELS else value

    def constant(self, name: str) -> Any:
        """Return an NVML constant, or None when this pynvml is too old to have it."""
        return getattr(self.mod, name, None)

    def note(self, call: str, code: int, error: str) -> None:
        """Log one omitted field once per (call, error): debug when expected, a warning otherwise."""
        if (call, code) in self._noted:
            return
        self._noted.add((call, code))
        absent = code in self._codes(nf.ABSENT_ERRORS)
        log.log(logging.DEBUG if absent else logging.WARNING, "nvml field omitted",
                extra={"call": call, "error": error})

    def _codes(self, names: Sequence[str]) -> set[int]:
        return {c for n in names if (c := getattr(self.mod, n, None)) is not None}

    def field_values(self, g: GPU, wanted: Sequence[tuple[int, int]]) -> dict[tuple[int, int], float]:
        """Read (field id, scope id) pairs in one call; unsupported ones are dropped from later calls."""
        live = [w for w in wanted if ("fv", id(g.handle), *w) not in self._skip]
        if not live:
            return {}
        got = self.get("nvmlDeviceGetFieldValues", g.handle, live)
        out: dict[tuple[int, int], float] = {}
        success = self.mod.NVML_SUCCESS
        for want, v in zip(live, got or (), strict=False):
            code = int(v.nvmlReturn)
            if code != success:
                if code in self._codes(nf.PERMANENT_ERRORS):
                    self._skip.add(("fv", id(g.handle), *want))
                self.note(f"nvmlDeviceGetFieldValues({want[0]})", code, f"NVML error {code}")
                continue
            value = nf.field_value(v)
            if value is not None:
                out[want] = value
        return out

    def drain_xids(self) -> list[tuple[str, int]]:
        """Return the (uuid, xid) events waiting in the event set, at most MAX_EVENTS_PER_RUN, never blocking."""
        if self._events is None:
            return []
        mod, out = self.mod, []
        for _ in range(MAX_EVENTS_PER_RUN):
            try:
                ev = mod.nvmlEventSetWait_v2(self._events, 0)  # timeout 0: poll, never block
            except mod.NVMLError as exc:
                if self.reason(getattr(exc, "value", None)) is not None:
                    raise
                break  # NVML_ERROR_TIMEOUT: no more events
            if ev.eventType & mod.nvmlEventTypeXidCriticalError:
                out.append((nf.text(mod.nvmlDeviceGetUUID(ev.device)), int(ev.eventData)))
        return out
