"""Guardrails: engine signals the seeds say to watch (prefix cache, speculative decoding, GPU/queue
contradictions), stage budgets, and the alerts on the unhappy-path probes (verdicts: sloguard.probes.checks)."""
