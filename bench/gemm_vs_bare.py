"""Does ``accelbench kernels gemm`` lose anything to the loop a user would time by hand? Both, alternating, on one
device: accelbench's figure (its sustained median over its timing budget, the cache flushed between samples where
the device has events) beside a bare loop of the same ``a @ b`` timed the same way (CUDA events, or the host clock
on a CPU) for as many calls, stated twice: its median (sustained, as accelbench's) and its best sample (a burst).
The clocks each ran at are read from the device where a reader exists (NVML, amdsmi), right after each.

    python bench/gemm_vs_bare.py [--size 8192] [--precision bf16] [--device cuda] [--rounds 3]

Prints each round and the median ratio accelbench/bare-median (goal >= 0.98); a gap between the bare median and its
best is the clocks' (sustained against burst), not the harness's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--precision", default="bf16", choices=tuple(DTYPES))
    p.add_argument("--device", default="cuda")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--samples", type=int, default=50, help="bare-loop samples a round")
    args = p.parse_args(argv)
    if min(args.size, args.rounds, args.samples) < 1:
        p.error("--size, --rounds and --samples must be at least 1")
    return args


def clocks(device: Any) -> dict[str, Any]:
    """The device's clocks and throttle reasons now, as accelbench's reader gives them ({} on a CPU)."""
    from accelbench.devices.kind import kind_of, reader_for

    if device.type == "cpu":
        return {}
    index = kind_of(device).monitored(device)
    reader = reader_for(index) if index is not None else None
    return reader.conditions(index) if reader is not None else {}


def accelbench_figure(args: argparse.Namespace) -> tuple[float, dict[str, Any]]:
    """accelbench's TFLOPS for the product, run as a user runs it, and the clocks its record kept."""
    n = str(args.size)
    with tempfile.TemporaryDirectory() as folder:  # the figure is printed here, not kept in the user's store
        cmd = [sys.executable, "-m", "accelbench", "kernels", "gemm", "--m", n, "--n", n, "--k", n,
               "--precision", args.precision, "--device", args.device, "--json", "--db", f"{folder}/s.db",
               "--out", folder]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"accelbench kernels gemm failed: {done.stderr.strip().splitlines()[-1:]}")
    data = json.loads(done.stdout)
    record = (data.get("results") or data)[0] if isinstance(data, dict) else data[0]
    return float(record["metrics"]["tflops"]["value"]), dict(record.get("conditions", {}).get("gpu") or {})


def bare_figures(args: argparse.Namespace) -> tuple[float, float]:
    """The bare loop's TFLOPS: (median sample, best sample), each sample one call after a warm-up."""
    import torch

    from accelbench.devices import resolve_device
    from accelbench.devices.kind import kind_of

    device = resolve_device(args.device)
    kind = kind_of(device)
    dtype = getattr(torch, DTYPES[args.precision])
    a = torch.randn(args.size, args.size, device=device, dtype=dtype)
    b = torch.randn_like(a)
    flops = 2 * args.size**3
    for _ in range(5):
        a @ b
    kind.synchronize(device)
    seconds = kind.time_events(lambda: a @ b, device, args.samples, None, 1) if kind.event_timing else []
    if not seconds:  # a host clock: one call a sample, the device waited for
        for _ in range(args.samples):
            t0 = time.perf_counter()
            a @ b
            kind.synchronize(device)
            seconds.append(time.perf_counter() - t0)
    rates = sorted(flops / s / 1e12 for s in seconds)
    return statistics.median(rates), rates[-1]


def main() -> None:
    args = options()
    from accelbench.devices import resolve_device

    device = resolve_device(args.device)
    ratios = []
    for i in range(args.rounds):
        ours, ours_clocks = accelbench_figure(args)
        median, best = bare_figures(args)
        bare_clocks = clocks(device)
        ratios.append(ours / median)
        print(
            f"round {i + 1}: accelbench {ours:,.4g} TFLOPS (clocks {ours_clocks or 'not read'}), bare median "
            f"{median:,.4g} (best {best:,.4g}; clocks after it {bare_clocks or 'not read'}): {ratios[-1]:.3f}x"
        )
    print(
        f"gemm {args.size}^3 {args.precision} on {args.device}: accelbench/bare-median median "
        f"{statistics.median(ratios):.3f}x (goal >= 0.98)"
    )


if __name__ == "__main__":
    main()
