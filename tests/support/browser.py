"""Headless Chromium driven over the DevTools protocol: open a page, see every request it makes, evaluate, shoot.

Chromium is Debian's `chromium` package (scripts/setup.sh installs it). Each session gets a fresh profile
and the flags that keep it from calling home; nothing leaves the machine but what the page itself asks for,
and every request the page makes is recorded (`Network.requestWillBeSent`), so a test can prove there are none.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium() -> str:
    """Return the browser binary; fail (not skip) when missing: scripts/setup.sh installs it."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "chromium is missing: scripts/setup.sh installs the Debian 'chromium' package"
    return path


@dataclass
class Visit:
    """What one page load did: the URLs it requested, what a script evaluated, a PNG screenshot."""

    requests: list[str] = field(default_factory=list)
    value: Any = None
    png: bytes = b""


async def _cdp(ws_url: str, url: str, expression: str, width: int, height: int, mobile: bool,
               shot_height: int | None) -> Visit:
    visit = Visit()
    ids = iter(range(1, 1_000_000))
    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:
        pending: dict[int, asyncio.Future[Any]] = {}
        loaded = asyncio.Event()

        async def reader() -> None:
            async for msg in ws:
                data = json.loads(msg.data)
                if data.get("method") == "Network.requestWillBeSent":
                    visit.requests.append(data["params"]["request"]["url"])
                elif data.get("method") == "Page.loadEventFired":
                    loaded.set()
                elif data.get("id") in pending:
                    pending.pop(data["id"]).set_result(data.get("result", data.get("error")))

        async def call(method: str, **params: Any) -> Any:
            i = next(ids)
            pending[i] = asyncio.get_running_loop().create_future()
            await ws.send_json({"id": i, "method": method, "params": params})
            return await asyncio.wait_for(pending[i], 60)

        task = asyncio.create_task(reader())
        try:
            await call("Network.enable")
            await call("Page.enable")
            await call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                       mobile=mobile)
            await call("Page.navigate", url=url)
            await asyncio.wait_for(loaded.wait(), 60)
            await asyncio.sleep(0.5)  # anything the page would fetch after load
            got = await call("Runtime.evaluate", expression=expression, returnByValue=True)
            visit.value = got.get("result", {}).get("value")
            clip = {"x": 0, "y": 0, "width": width, "height": shot_height or height, "scale": 1}
            shot = await call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
            visit.png = base64.b64decode(shot["data"])
        finally:
            task.cancel()
    return visit


def visit(tmp: Path, url: str, expression: str = "1", width: int = 390, height: int = 844,
          mobile: bool = True, shot_height: int | None = None) -> Visit:
    """Open `url` in a fresh headless Chromium (phone-sized by default) and return what happened.

    The screenshot covers the top `shot_height` pixels of the page (default: the viewport).
    """
    profile = tmp / f"chromium-profile-{time.monotonic_ns()}"
    proc = subprocess.Popen([chromium(), *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
            assert proc.poll() is None, proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(port_file.read_text().splitlines()[0])
        with urllib_open(f"http://127.0.0.1:{port}/json") as resp:
            page = next(t for t in json.loads(resp.read()) if t.get("type") == "page")
        return asyncio.run(_cdp(page["webSocketDebuggerUrl"], url, expression, width, height, mobile, shot_height))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def urllib_open(url: str) -> Any:
    import urllib.request

    return urllib.request.urlopen(url, timeout=10)
