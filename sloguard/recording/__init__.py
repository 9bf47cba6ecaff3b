"""Recordings of what a daemon saw (scrape pages, probe results, host reads, evaluations) and their replay."""
