"""benchmarks/diagnosis_defaults.py: the replay's faults reach the rules through the signals a daemon reads."""

from __future__ import annotations

from tests.support.benchmark_module import load

dd = load("diagnosis_defaults")


def test_the_kv_shrink_is_scraped_as_preemptions_and_named_by_its_rows() -> None:
    """A shrunk cache at 2 users/s: a KV row holds within 6 evaluations, before any capacity row."""
    run = dd.one_run(3, 2.0, "kv_shrink", 900.0, 6, dd.defaults(), False)
    assert 1 <= run.first["kv_cache_pressure"] <= 6 and run.first.get("capacity", 99) >= run.first["kv_cache_pressure"]


def test_a_healthy_run_holds_no_watched_cause() -> None:
    """Fifteen healthy evaluations after the warm-up at 2 users/s: no row of a watched cause holds."""
    assert dd.one_run(10_003, 2.0, None, 900.0, 15, dd.defaults(), False).first == {}


def test_the_scrape_counts_preemptions() -> None:
    sim = dd.VirtualServer(3, background_rps=2.0)
    scraper = dd.Scraper(sim)
    sim.shrink_kv(dd.KV_BLOCKS)
    sim.run_until(600.0)
    counters = scraper.view(600.0).models["m"].counters
    assert counters["preemptions"] == sim.preemptions > 0
