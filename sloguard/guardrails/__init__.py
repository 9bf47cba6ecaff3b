"""Guardrails: engine signals the seeds say to watch (prefix cache, speculative decoding, GPU/queue
contradictions) and the unhappy-path probes (abort propagation, oversized prompts), with their alerts."""
