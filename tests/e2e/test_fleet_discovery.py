"""Discovery end to end: the daemon follows a file_sd file and an http_sd server, and keeps the last good list.

One simulator serves four replicas (sloguard sim --replicas 4); a file names some of them for service `files`,
a real HTTP server answers http_sd for service `http`. The daemon's own /metrics is read for the truth:
which replicas it scrapes (sloguard_source_up{replica}), what each discovery holds (sloguard_sd_*).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.support.procs import free_port, http_get, metric_value, simulator, start_daemon, wait_until
from tests.support.threadserver import ThreadServer

REFRESH = 30.0  # file_sd refresh_interval: a change must be followed well within one


def group(sim_port: int, replicas: list[int], **labels: str) -> list[dict[str, Any]]:
    """Return target groups naming replicas of the simulator (one group each: its own metrics path)."""
    return [{"targets": [f"127.0.0.1:{sim_port}"],
             "labels": {"__metrics_path__": f"/replicas/{i}/metrics", "replica": f"r{i}", **labels}}
            for i in replicas]


class HTTPSD:
    """A real http_sd endpoint: answers `body` with `status` (and a content type) until told otherwise."""

    def __init__(self) -> None:
        self.body: Any = []
        self.status = 200
        self.ctype = "application/json"
        self.hits = 0

    def app(self) -> web.Application:
        async def sd(request: web.Request) -> web.Response:
            self.hits += 1
            return web.Response(status=self.status, text=json.dumps(self.body), content_type=self.ctype)

        app = web.Application()
        app.router.add_get("/sd", sd)
        return app


def config(port: int, state: Path, sd_file: Path, sd_url: str, sim_url: str) -> str:
    return f"""\
version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
discovery:
  - name: files
    file_sd: {{files: ["{sd_file}"], refresh_interval: {REFRESH:g}s}}
  - name: web
    http_sd: {{url: "{sd_url}", refresh_interval: 1s, timeout: 900ms}}
services:
  - {{name: files, engine: vllm, api_url: "{sim_url}", discovery: files, scrape_interval: 1s, scrape_timeout: 900ms}}
  - {{name: http, engine: vllm, discovery: web, match: {{app: chat}}, scrape_interval: 1s, scrape_timeout: 900ms}}
notifiers:
  - {{name: console, type: log}}
"""


def scraped(url: str, service: str) -> set[str]:
    """Return the replicas of a service the daemon scrapes now (sloguard_source_up present, whatever its value)."""
    text = http_get(f"{url}/metrics")[1].decode()
    return {line.split('replica="', 1)[1].split('"', 1)[0] for line in text.splitlines()
            if line.startswith("sloguard_source_up{") and f'target="{service}"' in line and "replica=" in line}


def series_of(url: str, service: str, replica: str) -> list[str]:
    """Return the daemon's series of one replica of a service."""
    text = http_get(f"{url}/metrics")[1].decode()
    return [line for line in text.splitlines()
            if line.startswith("sloguard_") and f'target="{service}"' in line and f'replica="{replica}"' in line]


def sd_value(url: str, name: str, config_name: str) -> float:
    return metric_value(http_get(f"{url}/metrics")[1].decode(), name, {"config": config_name}) or 0.0


def test_file_and_http_discovery_follow_changes_and_keep_the_last_good_list(tmp_path: Path) -> None:
    sd_file = tmp_path / "targets.json"
    httpsd = HTTPSD()
    with simulator(tmp_path, seed=3, extra=("--replicas", "4", "--background-rps", "0.5")) as sim, \
            ThreadServer(httpsd.app) as sd:
        sim_port = int(sim.url.rsplit(":", 1)[1])
        sd_file.write_text(json.dumps(group(sim_port, [0, 1])))
        httpsd.body = group(sim_port, [2], app="chat") + group(sim_port, [3], app="other")
        port = free_port()
        daemon = start_daemon(tmp_path, config(port, tmp_path / "state", sd_file, f"{sd.url}/sd", sim.url))
        try:
            wait_until(lambda: scraped(daemon.url, "files") == {"r0", "r1"}, 30, "file_sd replicas r0, r1")
            wait_until(lambda: scraped(daemon.url, "http") == {"r2"}, 30, "http_sd replica r2 (r3 does not match)")

            # file_sd: a new list (atomic rename, as a ConfigMap update is) is followed within one refresh.
            tmp = tmp_path / "targets.json.new"
            tmp.write_text(json.dumps(group(sim_port, [1, 3])))
            written = time.monotonic()
            tmp.replace(sd_file)
            wait_until(lambda: scraped(daemon.url, "files") == {"r1", "r3"}, REFRESH, "file_sd change followed")
            assert time.monotonic() - written < REFRESH
            wait_until(lambda: not series_of(daemon.url, "files", "r0"), 5, "the vanished replica's series gone")

            # http_sd fails three ways: 500, not JSON, wrong content type; the last good list stays.
            good = None
            for status, body, ctype in ((500, [], "application/json"), (200, "<html>", "text/html"),
                                        (200, "{", "application/json")):
                before = sd_value(daemon.url, "sloguard_sd_http_failures_total", "web")
                httpsd.status, httpsd.ctype = status, ctype
                httpsd.body = body if body != "{" else None
                wait_until(lambda b=before: sd_value(daemon.url, "sloguard_sd_http_failures_total", "web") > b, 15,
                           f"an http_sd failure counted ({status} {ctype})")
                assert scraped(daemon.url, "http") == {"r2"}
                assert sd_value(daemon.url, "sloguard_sd_discovered_targets", "web") == 2
                good = good or sd_value(daemon.url, "sloguard_sd_last_success_timestamp_seconds", "web")
            assert sd_value(daemon.url, "sloguard_sd_last_success_timestamp_seconds", "web") == good

            # Recovered: the full list each refresh, so an empty one removes every replica.
            httpsd.status, httpsd.ctype, httpsd.body = 200, "application/json", group(sim_port, [0, 2], app="chat")
            wait_until(lambda: scraped(daemon.url, "http") == {"r0", "r2"}, 15, "http_sd recovered")
            httpsd.body = []
            wait_until(lambda: scraped(daemon.url, "http") == set(), 15, "an empty http_sd list removes all")
            assert "Traceback" not in daemon.output()
        finally:
            daemon.stop()
