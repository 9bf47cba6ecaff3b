"""Service discovery, Prometheus-style: file_sd, http_sd and Kubernetes feed one target registry."""
