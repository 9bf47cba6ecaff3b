"""A TCP relay that delays what clients send, for benchmarks/record_incidents.py's network fault.

Stands in for a slow gateway on the probes' path where the kernel's netem qdisc is not available (containers without
sch_netem): every chunk from a client reaches the engine DELAY seconds late while the delay file holds a number of
milliseconds (0 or absent: no delay). Bounded: it serves until killed, on loopback only.

    .venv/bin/python benchmarks/incident_proxy.py LISTEN_PORT UPSTREAM_PORT DELAY_FILE
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


class Delay:
    """The delay in seconds, re-read from its file at most every 0.1 s."""

    def __init__(self, path: Path) -> None:
        self.path, self.value, self._read = path, 0.0, 0.0

    def now(self) -> float:
        loop = asyncio.get_running_loop()
        if loop.time() - self._read > 0.1:
            self._read = loop.time()
            try:
                self.value = max(0.0, float(self.path.read_text().strip() or 0)) / 1e3
            except (OSError, ValueError):
                self.value = 0.0
        return self.value


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: Delay | None) -> None:
    try:
        while data := await reader.read(65536):
            if delay is not None and (d := delay.now()) > 0:
                await asyncio.sleep(d)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main(listen: int, upstream: int, delay_file: Path) -> None:
    delay = Delay(delay_file)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer, delay), _pipe(up_reader, writer, None))

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])))
