"""sloguard: LLM inference latency SLO daemon and Prometheus exporter."""

__version__ = "0.1.0"
