"""Regression reports: baseline vs candidate release, with confidence intervals and a controlled verdict.

inputs (bench results files, store slices, Prometheus) -> `Side` (per-request columns or histograms) ->
`regression` (seeded stratified bootstrap, Holm) -> `build` (the report document, every number) ->
`render_*` (Markdown, HTML, JSON). `releases` records release identities in the daemon and runs the
automatic before/after report after a soak.
"""
