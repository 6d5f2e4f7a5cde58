"""One rank of the all-reduce benchmark; started by torchrun, never imported by the CLI.

Every rank times each all_reduce; the per-iteration time is the slowest rank's
(a collective is done when its last participant is), as nccl-tests reports it.
Rank 0 writes the samples as JSON for the parent benchmark to turn into records.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist

from accelbench.launch.torchrun import exit_rank, finish_rank


def _time_one(t: torch.Tensor, device: torch.device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dist.all_reduce(t)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t0 = time.perf_counter_ns()
    dist.all_reduce(t)
    return (time.perf_counter_ns() - t0) / 1e9


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", required=True)
    p.add_argument("--backend", required=True)
    p.add_argument("--device", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--min-reps", type=int, default=10)
    p.add_argument("--min-time", type=float, default=0.5)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    local = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        numel = max(1, size // 4)
        t = torch.full((numel,), float(rank + 1), device=device)
        dist.all_reduce(t)  # warm-up, and the correctness check
        expected = sum(range(1, world + 1))  # each rank contributed rank + 1
        correct = bool(torch.all(t == expected).item())
        for _ in range(3):
            dist.all_reduce(t)
        samples: list[float] = []
        start = time.perf_counter()
        while True:
            local_t = torch.tensor([_time_one(t, device)], device=device)
            dist.all_reduce(local_t, op=dist.ReduceOp.MAX)
            samples.append(float(local_t.item()))
            done = len(samples) >= args.min_reps and time.perf_counter() - start >= args.min_time
            flag = torch.tensor([1.0 if done else 0.0], device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)  # every rank stops at the same iteration
            if flag.item() == 1.0 or len(samples) >= 100_000:
                break
        results.append({"bytes": numel * 4, "samples": samples, "correct": correct})
    finish_rank(rank, args.out, {"world_size": world, "backend": args.backend, "results": results})


if __name__ == "__main__":
    main()
    exit_rank()
