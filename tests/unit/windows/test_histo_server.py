"""ServerWindows: windowed quantiles and rates from successive views, restarts, promtool-clean families."""

from __future__ import annotations

import math
import shutil
import subprocess

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry
from support.exposition import unknown_in_text

from sloguard.histogram import quantile
from sloguard.model import Histogram, ModelView, ServerView
from sloguard.windows.server import ServerWindows

INF = math.inf


def view(ts: float, n: float, tokens: float, model: str = "m", target: str = "chat") -> ServerView:
    """n requests so far, 90% with TTFT ≤ 0.1 s, the rest ≤ 0.5 s."""
    ttft = Histogram(((0.1, 0.9 * n), (0.5, n), (INF, n)), n, 0.1 * n)
    mv = ModelView(
        model=model,
        histograms={"ttft": ttft},
        gauges={"requests_running": 3.0, "kv_cache_usage_ratio": 0.5},
        counters={"generation_tokens": tokens, "prefix_cache_queries": tokens, "prefix_cache_hits": tokens / 4},
        finished_by_reason={"stop": n},
    )
    return ServerView(target=target, engine="vllm", ts=ts, models={model: mv})


def fed(points: list[tuple[float, float, float]]) -> ServerWindows:
    sw = ServerWindows()
    for ts, n, tok in points:
        sw.add(view(ts, n, tok))
    return sw


def test_histogram_over_window_and_models() -> None:
    sw = fed([(0, 100, 0), (15, 200, 1500), (30, 300, 3000)])
    h = sw.histogram("chat", "m", "ttft", 60, 30)
    assert h is not None and h.count == 200
    assert quantile(0.5, h) == pytest.approx(0.1 * (100 / 180))
    sw.add(view(30, 50, 10, model="other"))
    sw.add(view(45, 60, 20, model="other"))
    both = sw.histogram("chat", None, "ttft", 60, 45)
    assert both is not None and both.count == 200 + 10
    assert sw.histogram("chat", "m", "itl", 60, 30) is None


def test_span_and_finished_reasons_for_server_budgets() -> None:
    sw = ServerWindows()
    for ts, n, aborted in ((0, 100, 0), (15, 200, 5), (30, 300, 12)):
        v = view(ts, n, 0)
        mv = v.models["m"]
        sw.add(ServerView(v.target, v.engine, ts, {"m": ModelView("m", mv.histograms, mv.gauges, mv.counters,
                                                                  {"stop": n, "abort": aborted})}))
    # the delta reaches back to the point at or just before now - window (ts 0 for a 20 s window at 30)
    assert sw.span("chat", "ttft", 60, 30) == 30 and sw.span("chat", "ttft", 20, 30) == 30
    assert sw.span("chat", "ttft", 15, 30) == 15
    assert sw.span("other", "ttft", 60, 30) == 0.0
    assert sw.finished("chat", frozenset({"abort", "error"}), 60, 30) == 12
    assert sw.finished("chat", frozenset({"abort"}), 15, 30) == 7
    assert sw.finished("chat", frozenset({"error"}), 60, 30) == 0.0


def test_label_check_knows_the_server_windows() -> None:
    from sloguard.config.labels import SERVER_QUANTILES, SERVER_WINDOWS
    from sloguard.windows.server import QUANTILES

    assert ServerWindows().windows == SERVER_WINDOWS
    assert tuple(str(q) for q in QUANTILES) == SERVER_QUANTILES


def test_restart_counted_once_per_scrape() -> None:
    sw = fed([(0, 100, 1000), (15, 200, 2000), (30, 5, 10), (45, 10, 20)])
    assert sw.restarts() == {"chat": 1}
    h = sw.histogram("chat", "m", "ttft", 60, 45)
    assert h is not None and h.count == 100 + 10  # 100→200, then 10 since the restart


def render(sw: ServerWindows, now: float) -> str:
    class C(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            return sw.families(now)

    reg = CollectorRegistry()
    reg.register(C())
    return generate_latest(reg).decode()


def test_families_values_and_empty_windows() -> None:
    sw = fed([(0, 100, 0), (15, 200, 1500), (30, 300, 3000)])
    text = render(sw, 30)
    assert 'sloguard_server_ttft_seconds{model="m",quantile="0.5",replica="",target="chat",window="1m"}' in text
    assert 'sloguard_server_generation_tokens_per_second{model="m",replica="",target="chat",window="1m"} 100.0' in text
    assert 'sloguard_server_prefix_cache_hit_ratio{model="m",replica="",target="chat",window="5m"} 0.25' in text
    assert ('sloguard_server_requests_finished_per_second{model="m",reason="stop",replica="",target="chat",'
            'window="1m"}') in text
    assert 'sloguard_server_requests_running{model="m",replica="",target="chat"} 3.0' in text
    assert "sloguard_server_restarts_total{replica=\"\",target=\"chat\"} 0.0" in text
    later = render(sw, 1000)  # no scrape in either window: nothing but the restart counter
    assert "sloguard_server_ttft_seconds" not in later
    assert "sloguard_server_requests_running" not in later
    assert "tokens_per_second" not in later
    one = render(fed([(0, 100, 0)]), 10)
    assert "sloguard_server_ttft_seconds" not in one  # one scrape is not a window


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not on PATH")
def test_families_pass_promtool() -> None:
    sw = fed([(0, 100, 0), (15, 200, 1500), (30, 300, 3000)])
    out = subprocess.run(["promtool", "check", "metrics"], input=render(sw, 30), capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "" and out.stderr.strip() == ""
    assert unknown_in_text(render(sw, 30)) == []  # `sloguard check` knows every name and label exported


def test_reconfigure_forgets_removed_targets_and_adopts_the_new_horizon() -> None:

    sw = ServerWindows(windows=(60.0,), max_age=900.0)
    h = Histogram(((0.5, 1.0), (math.inf, 2.0)), 2.0, 1.0)
    for target in ("kept", "gone"):
        sw.add(ServerView(target, "vllm", 1000.0, {"m": ModelView("m", histograms={"ttft": h})}))
    sw.reconfigure({"kept"}, max_age=86400.0, now=1010.0)
    assert sw.histogram("gone", None, "ttft", 60.0, 1010.0) is None
    assert "gone" not in sw.restarts() and all(k[0] == "kept" for k in sw._hist)
    assert all(w.max_age == 86400.0 for w in sw._hist.values())
    families = {s.labels.get("target") for f in sw.families(1010.0) for s in f.samples}
    assert "gone" not in families
    sw.reconfigure({"kept"}, max_age=60.0, now=5000.0)  # silent for longer than the horizon: dropped
    assert not sw._hist
