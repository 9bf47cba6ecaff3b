"""Where the time goes and why: one bottleneck verdict per SLO after each evaluation (docs/diagnosis.md).

model.py (value types), rules.py (the RULES table, in precedence order), engine.py (pure: Inputs -> Verdict),
inputs.py (breaches and stage readings over the diagnosis window), signals.py (engine, host and GPU signals
from what sloguard already collects), arrivals.py (the users' arrivals without sloguard's probes and their surge
in Poisson sds), history.py (healthy baselines, counter and gauge series), text.py (the
verdict as one line, evidence lines and JSON), service.py (the daemon's Diagnoser: state, series, API, alert
annotations). `sloguard status` renders with the incident package (sloguard/incident/cli.py).
"""
