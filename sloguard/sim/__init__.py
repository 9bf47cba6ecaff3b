"""Simulated vLLM inference server: OpenAI streaming API, vLLM V1 `/metrics`, queueing model, faults."""
