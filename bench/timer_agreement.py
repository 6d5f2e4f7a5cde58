"""Does accelbench time a kernel as an independent timer does?

For GEMM, convolution and attention on the CPU, builds the exact call the kernel
benchmark times and measures it with accelbench's Timer and with
``torch.utils.benchmark.Timer.blocked_autorange``, interleaved over several
rounds so both see the same neighbours on a shared machine. Prints each median
and the ratio (the tests require agreement within 10%).

    python bench/timer_agreement.py [--rounds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import importlib
import statistics

import torch
from torch.utils.benchmark import Timer as TorchTimer

from accelbench.measure.timer import Timer, TimerConfig
from accelbench.registry import get

KERNELS = [
    ("kernels/gemm", {"m": 1024, "n": 1024, "k": 1024}),
    ("kernels/conv", {"w": 56, "h": 56, "c": 64, "n": 4, "k": 64}),
    ("kernels/attention", {"batch": 2, "heads": 8, "seq_len": 512, "head_dim": 64, "precision": "fp32"}),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--min-time", type=float, default=0.5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    for name, params in KERNELS:
        info = get(name)
        case = importlib.import_module(info.target.split(":")[0]).build_case(
            info.make_params(params), torch.device("cpu")
        )
        ratios = []
        for _ in range(args.rounds):
            ours = Timer(case.fn, "cpu", TimerConfig(min_time=args.min_time)).measure().median
            ref = TorchTimer("fn()", globals={"fn": case.fn}, num_threads=args.threads)
            theirs = ref.blocked_autorange(min_run_time=args.min_time).median
            ratios.append(ours / theirs)
        label = info.params.describe(info.params().to_dict() | params)
        print(
            f"{name:18} {label:40} accelbench {ours * 1e3:8.3f} ms  torch.utils.benchmark {theirs * 1e3:8.3f} ms  "
            f"median ratio {statistics.median(ratios):.3f}"
        )


if __name__ == "__main__":
    main()
