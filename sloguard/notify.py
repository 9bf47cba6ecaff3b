"""systemd readiness and watchdog (sd_notify) without a dependency; a no-op outside systemd."""

from __future__ import annotations

import logging
import os
import socket
import time

log = logging.getLogger("sloguard.notify")


class Notifier:
    """Send sd_notify messages to $NOTIFY_SOCKET; never raises (a lost message must not stop the daemon)."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        env = dict(os.environ) if env is None else env
        addr = env.get("NOTIFY_SOCKET", "")
        self.address = "\0" + addr[1:] if addr.startswith("@") else addr  # '@' = abstract namespace
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        mine = not pid or pid == str(os.getpid())
        self.watchdog = int(usec) / 1e6 if usec.isdigit() and mine else None
        self._failing = False

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def send(self, *fields: str) -> None:
        """Send one datagram of newline-separated `KEY=value` fields; never blocks (a full queue drops it).

        Runs on the event loop: a receiver that stops reading must not stall the daemon (and with it
        the watchdog it is meant to feed). A failure is logged once until a send succeeds again.
        """
        if not self.address:
            return
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.setblocking(False)
                s.sendto("\n".join(fields).encode(), self.address)
        except OSError as exc:
            if not self._failing:
                log.warning("sd_notify failed (logged once until it works again)", extra={"error": str(exc)})
            self._failing = True
            return
        self._failing = False

    def ready(self) -> None:
        """Tell systemd the daemon serves (after the first evaluation)."""
        self.send("READY=1", "STATUS=serving")

    def reloading(self) -> None:
        """Tell systemd a reload started (Type=notify-reload semantics; harmless for Type=notify)."""
        self.send("RELOADING=1", f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}")

    def stopping(self) -> None:
        """Tell systemd shutdown started."""
        self.send("STOPPING=1")

    def ping(self) -> None:
        """Feed the watchdog."""
        self.send("WATCHDOG=1")
