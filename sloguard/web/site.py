"""Serve one aiohttp app on a listen address through the connection guard, with the web config's TLS."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from sloguard.web.guard import Guard, GuardedSite, runner_options
from sloguard.web.listen import describe, parse_listen
from sloguard.web.webconfig import WebConfig


async def start_site(app: web.Application, guard: Guard, web_config: WebConfig, listen: str, **options: Any
                     ) -> tuple[web.AppRunner, int]:
    """Serve `app` on `listen` through `guard`; return the runner and the bound port; raise ListenError."""
    host, port = parse_listen(listen)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, **runner_options(guard.limits), **options)
    await runner.setup()
    site = GuardedSite(runner, host, port, guard, ssl_context=web_config.ssl_context)
    try:
        await site.start()
    except OSError as exc:  # in use, permission, no such interface: one line, not a traceback
        await runner.cleanup()
        raise describe(listen, exc) from None
    return runner, site.port
