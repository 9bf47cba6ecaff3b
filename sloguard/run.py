"""`sloguard run`: the daemon as a process: exit 2 when it cannot start, SIGHUP reloads, SIGTERM/SIGINT drain."""

from __future__ import annotations

import asyncio
import signal
import sys

from sloguard.config.load import ConfigError
from sloguard.cycle import Recorder
from sloguard.daemon import Daemon
from sloguard.statedir import StateDirError
from sloguard.web.listen import ListenError


async def serve(config_path: str, web_config_path: str | None = None, listen: str | None = None,
                lifecycle: bool = False, max_connections: int = 512, recorder: Recorder | None = None,
                duration: float | None = None) -> int:
    """Run the daemon until SIGTERM/SIGINT (or `duration` seconds); SIGHUP reloads. Return the exit code."""
    daemon = Daemon(config_path, web_config_path, listen, lifecycle=lifecycle, max_connections=max_connections,
                    recorder=recorder)
    try:
        await daemon.start()
    except ConfigError as exc:
        print(exc.report(config_path), file=sys.stderr)
        return 2
    except StateDirError as exc:
        print(f"sloguard: {exc}", file=sys.stderr)
        return 2
    except ListenError as exc:
        fix = ("pass another --web.listen-address HOST:PORT" if listen
               else f"change `listen:` in {config_path} or pass --web.listen-address HOST:PORT")
        print(f"sloguard: {exc}; {fix}", file=sys.stderr)
        return 2
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(daemon.reload()))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, daemon.stopping.set)
    if duration is not None:
        loop.call_later(duration, daemon.stopping.set)
    await daemon.stopping.wait()
    await daemon.shutdown()
    return 0
