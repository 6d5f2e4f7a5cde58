"""Does accelbench's training measurement add anything to what it measures?

For two models, compares the throughput ``accelbench train`` reports (run in
this process, without isolation) with a minimal hand-written training loop of the
same model, batch, precision and threads, timed from outside, interleaved over
several rounds so both see the same neighbours. The goal: within 2%.

    python bench/train_overhead.py [--rounds 3] [--scale tiny] [--steps 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from accelbench.suite.suites import make_entry
from accelbench.suite.worker import run_inline
from accelbench.workloads import workload_class

MODELS = [("resnet18", 16), ("bert", 8)]


def hand_loop(name: str, batch: int, scale: str, steps: int) -> float:
    workload = workload_class(name)()
    model = workload.build(scale)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = workload.synthetic_batch(batch, torch.device("cpu"), scale)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        workload.loss(model, data).backward()
        opt.step()

    for _ in range(5):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return batch * steps / (time.perf_counter() - t0)


def accelbench_rate(name: str, batch: int, scale: str, steps: int) -> float:
    params = {"model": name, "batch_size": str(batch), "scale": scale, "warmup": 5, "num_batches": steps}
    params |= {"display_every": max(1, steps // 5), "threads": torch.get_num_threads()}
    [result] = run_inline(make_entry("train/throughput", params))
    return result.metrics["throughput"].value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scale", default="tiny", choices=("tiny", "full"))
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    for name, batch in MODELS:
        ratios = []
        for _ in range(args.rounds):
            ours = accelbench_rate(name, batch, args.scale, args.steps)
            theirs = hand_loop(name, batch, args.scale, args.steps)
            ratios.append(ours / theirs)
        med = statistics.median(ratios)
        print(
            f"{name:10} batch {batch:3} ({args.scale}): accelbench {ours:9.1f}/s  hand loop {theirs:9.1f}/s  "
            f"median ratio {med:.4f} ({(med - 1) * 100:+.2f}%; goal within +-2%)"
        )


if __name__ == "__main__":
    main()
