"""Hostile /metrics targets: cardinality bombs, huge pages, long or many labels, compression bombs.

`HostileServer` serves every page of `PAGES` at `/<name>` from a thread on 127.0.0.1, so a daemon started as a
real process can scrape them. Pages are built once, deterministic, and carry real vLLM families (so only the
limits, not engine detection, decide their fate).
"""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

_VLLM_ONE_MODEL = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="{m}"}} 1
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="{m}"}} 0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{model_name="{m}"}} 0.25
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{model_name="{m}"}} 100
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="0.1",model_name="{m}"}} 5
vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="{m}"}} 10
vllm:time_to_first_token_seconds_sum{{model_name="{m}"}} 1.5
vllm:time_to_first_token_seconds_count{{model_name="{m}"}} 10
"""


def healthy(model: str = "m") -> str:
    """Return a small, valid vLLM page for one model."""
    return _VLLM_ONE_MODEL.format(m=model)


def cardinality_bomb(n: int = 300_000) -> str:
    """One gauge with n distinct model_name values (a gateway gone wrong, thousands of LoRA adapters)."""
    rows = "".join(f'vllm:num_requests_running{{model_name="lora-{i}"}} 1\n' for i in range(n))
    return "# TYPE vllm:num_requests_running gauge\n" + rows


def big_page(n: int = 200_000) -> str:
    """A valid engine page padded with n lines of an unrelated family (a big exporter behind the same port)."""
    rows = "".join(f'app_http_requests_total{{path="/api/v1/item/{i}",code="200"}} {i}\n' for i in range(n))
    return healthy() + "# TYPE app_http_requests_total counter\n" + rows


def long_label_value(length: int = 1 << 20) -> str:
    """A valid page whose one extra sample has a label value of `length` characters."""
    return healthy() + f'vllm:num_requests_waiting{{model_name="m",x="{"a" * length}"}} 1\n'


def many_labels(n: int = 200) -> str:
    """A valid page whose one extra sample has n labels."""
    labels = ",".join(f'l{i}="v"' for i in range(n))
    return healthy() + f"vllm:num_requests_waiting{{model_name=\"m\",{labels}}} 1\n"


def many_models(n: int = 2_000) -> str:
    """n full models (n * 10 samples, under the sample limit) whose exported series are far over the bound."""
    return "".join(healthy(f"model-{i}") for i in range(n))


def many_reasons(n: int = 20_000) -> str:
    """One model whose finished-request counter has n distinct finished_reason values."""
    rows = "".join(f'vllm:request_success_total{{finished_reason="r{i}",model_name="m"}} 1\n' for i in range(n))
    return healthy() + rows


# name -> (page, the failure reason sloguard must report with default limits)
PAGES: dict[str, tuple[Callable[[], str], str]] = {
    "cardinality_bomb": (cardinality_bomb, "sample_limit"),
    "big_page": (big_page, "sample_limit"),
    "long_label_value": (long_label_value, "label_value_length_limit"),
    "many_labels": (many_labels, "label_limit"),
    "many_models": (many_models, "series_limit"),
    "many_reasons": (many_reasons, "series_limit"),
    "huge_body": (lambda: healthy() + "# " + "x" * (17 << 20) + "\n", "too_large"),
    "gzip_bomb": (lambda: healthy() + "#" * (64 << 20) + "\n", "too_large"),
}


def daemon_config(url: Callable[[str], str], port: int, state: str, targets: dict[str, str],
                  interval: float = 1.0) -> str:
    """Return a daemon config scraping `healthy` plus {target name: "page[|extra target keys]"} every `interval`."""
    rows = ""
    for name, page in {"healthy": "healthy", **targets}.items():
        page, _, extra = page.partition("|")
        rows += (f"  - {{name: {name}, engine: auto, metrics_url: '{url(page)}', scrape_interval: {interval:g}s, "
                 f"scrape_timeout: {int(interval * 900)}ms{extra}}}\n")
    return f"""version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
gpu: {{nvml: "off"}}
targets:
{rows}"""


@dataclass
class HostileServer:
    """Serve `/<page name>` for every page (gzip_bomb gzip-encoded) and `/healthy`, from a thread."""

    pages: dict[str, tuple[Callable[[], str], str]] = field(default_factory=lambda: dict(PAGES))
    port: int = 0
    hits: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._bodies: dict[str, tuple[bytes, dict[str, str]]] = {"healthy": (healthy().encode(), {})}
        for name, (make, _) in self.pages.items():
            raw = make().encode()
            if name == "gzip_bomb":
                self._bodies[name] = (gzip.compress(raw, 9), {"Content-Encoding": "gzip"})
            else:
                self._bodies[name] = (raw, {})
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("hostile server did not start")
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _handle(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self._bodies:
            return web.Response(status=404)
        self.hits[name] = self.hits.get(name, 0) + 1
        body, headers = self._bodies[name]
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4", **headers})

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/{name}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())


def serve_forever() -> None:
    """Serve every page until stdin closes; print the port first (benchmarks run it as its own process)."""
    import sys

    with HostileServer() as server:
        print(server.port, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    serve_forever()
