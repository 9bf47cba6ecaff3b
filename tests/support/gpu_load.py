"""A co-located GPU workload for the GPU tests and benchmarks/gpu.py: runs until SIGTERM.

    python tests/support/gpu_load.py --kind gemm|copy|decode [--device cuda:0] [--out FILE]

gemm: back-to-back bf16 GEMMs (a prefill-like, tensor-bound neighbour); copy: device-to-device copies
(HBM-bound); decode: a latency-sensitive loop of small batch-1 steps, each synchronised and timed, written
to --out as "<unix end time> <step seconds>" lines on exit. Prints "ready" once warmed up.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch


class Stop(Exception):
    """Raised by the SIGTERM handler."""


def _stop(signum: int, frame: object) -> None:
    raise Stop()


def workload(kind: str, dev: torch.device) -> Callable[[], Any]:
    """Return one step of the chosen workload on `dev`."""
    cuda = dev.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    if kind == "gemm":
        n = 8192 if cuda else 512
        a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
        return lambda: torch.mm(a, b)
    if kind == "copy":
        src = torch.empty((1 << 30) if cuda else (32 << 20), dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)
    d, layers = (4096, 8) if cuda else (512, 4)  # batch-1 decode: weight reads dominate, like a real TPOT
    ws = [torch.randn(d, d, device=dev, dtype=dtype) * 0.01 for _ in range(layers)]
    x = torch.randn(1, d, device=dev, dtype=dtype)

    def step() -> torch.Tensor:
        y = x
        for w in ws:
            y = torch.tanh(y @ w)
        return y
    return step


def main(argv: list[str] | None = None) -> int:
    """Run the workload until SIGTERM; for `decode`, write each step's end time and latency to --out."""
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=("gemm", "copy", "decode"), required=True)
    p.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    step, steps = workload(args.kind, dev), []
    signal.signal(signal.SIGTERM, _stop)
    mode: AbstractContextManager[Any] = torch.inference_mode()
    try:
        with mode:
            for _ in range(5):
                step()
            sync()
            print("ready", flush=True)
            n = 0
            while True:
                t0 = time.perf_counter()
                step()
                n += 1
                if args.kind == "decode":
                    sync()
                    steps.append((time.time(), time.perf_counter() - t0))
                elif n % 16 == 0:
                    sync()  # bound the queue so SIGTERM is handled promptly
    except Stop:
        sync()
    if args.out:
        with open(args.out, "w") as fh:
            fh.writelines(f"{t:.6f} {lat:.9f}\n" for t, lat in steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
