"""Everything about the GPU: NVML source and fields, GPM activity, health, the canary, spec peaks.

Importing this package imports nothing heavy; torch is imported only by `canary_worker`, which runs in
its own process.
"""
