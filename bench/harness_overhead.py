"""How much does accelbench's harness add to what it measures?

Times the same GEMM two ways in one process, interleaved so both see the same
neighbours on a shared machine: (1) the ``kernels/gemm`` benchmark exactly as the
CLI runs it (inline, without the process isolation), and (2) a bare loop of
``torch.mm`` calls timed from outside. Prints both per-call times and their
ratio; the goal is a ratio within 2% of 1.

    python bench/harness_overhead.py [--size 1024] [--rounds 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline


def bare_loop(n: int, seconds: float) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    c = torch.empty(n, n)
    for _ in range(3):
        torch.mm(a, b, out=c)
    calls = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.mm(a, b, out=c)
        calls += 1
    return (time.perf_counter() - t0) / calls


def harness(n: int, seconds: float, threads: int) -> float:
    entry = make_entry(
        "kernels/gemm", {"m": n, "n": n, "k": n, "threads": threads, "min_time": seconds, "check": False}
    )
    [result] = run_inline(entry)
    return result.metrics["seconds"].value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ratios = []
    print(f"GEMM {args.size}^3 fp32, {args.threads} threads, {args.rounds} interleaved rounds")
    for i in range(args.rounds):
        ours = harness(args.size, args.seconds, args.threads)
        bare = bare_loop(args.size, args.seconds)
        ratios.append(ours / bare)
        print(f"round {i + 1}: accelbench {ours * 1e3:.3f} ms  bare loop {bare * 1e3:.3f} ms  ratio {ours / bare:.4f}")
    med = statistics.median(ratios)
    print(f"median ratio accelbench / bare loop: {med:.4f} ({(med - 1) * 100:+.2f}%; goal within +-2%)")


if __name__ == "__main__":
    main()
