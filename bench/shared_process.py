"""What sharing a worker process saves a suite of kernels: the same suite of small GEMM entries run with each entry in
its own process and with consecutive entries sharing one, alternating, on this machine and device.

    python bench/shared_process.py [--entries 12] [--rounds 3] [--device cpu]

Prints each round's wall seconds and the median ratio isolated/shared (above 1: sharing saves that much). On a GPU
the saving is each entry's device context start-up; on a CPU, the fork and the first call's set-up.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from accelbench import registry
from accelbench.results.store import Store
from accelbench.suite.runner import RunOptions, run_suite
from accelbench.suite.suites import Suite, make_entry
from accelbench.system.profile import collect_profile


def suite(n: int, device: str) -> Suite:
    quick = {"min_time": 0.05, "max_time": 0.2, "min_reps": 3, "precision": "fp32", "device": device}
    sizes = [256 + 32 * i for i in range(n)]
    return Suite("bench", [make_entry("kernels/gemm", quick | {"m": s, "n": s, "k": s}) for s in sizes])


def timed(s: Suite, shared: bool, folder: Path, profile: dict) -> float:
    info = registry.BENCHMARKS["kernels/gemm"]
    registry.BENCHMARKS["kernels/gemm"] = dataclasses.replace(info, shares_process=shared)
    try:
        with Store(folder / f"{time.monotonic_ns()}.db") as store:
            t0 = time.perf_counter()
            summary = run_suite(s, store, RunOptions(out_dir=folder / "runs"), profile=profile)
            seconds = time.perf_counter() - t0
    finally:
        registry.BENCHMARKS["kernels/gemm"] = info
    assert all(r.status == "ok" for r in summary.results), [r.error for r in summary.results]
    return seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--entries", type=int, default=12)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    if args.entries < 1 or args.rounds < 1:
        p.error("--entries and --rounds must be at least 1")
    s = suite(args.entries, args.device)
    profile = collect_profile()
    ratios = []
    with tempfile.TemporaryDirectory() as name:
        for i in range(args.rounds):
            order = (False, True) if i % 2 == 0 else (True, False)
            got = {shared: timed(s, shared, Path(name), profile) for shared in order}
            ratios.append(got[False] / got[True])
            print(f"round {i + 1}: isolated {got[False]:.1f} s, shared {got[True]:.1f} s ({ratios[-1]:.2f}x)")
    print(f"{args.entries} gemm entries on {args.device}: isolated/shared median {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
