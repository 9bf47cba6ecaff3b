"""The exporter: /metrics from the snapshot, the landing page and APIs, self metrics, the metrics reference."""
