"""Rolling windows: exact raw rings, mergeable sketches, per-SLO probe windows, server histograms."""
