"""`sloguard bench`: controlled load against one target, judged by the daemon's own SLO file.

Closed-loop concurrency and open-loop rate stages (every latency also from the scheduled send time, so a
saturated client cannot hide server latency), a search for the highest load at which the SLO holds, the
server's own view of each stage, and a versioned results file (RESULTS.jsonl) that reports compare.
Requests are sent by worker processes through the probes' own streaming code (sloguard.probes.PROBES).
"""
