"""One rank of the all-reduce benchmark; started by the kit's launcher, never imported by the CLI.

Timed as nccl-tests times it: after a barrier, a burst of back-to-back all-reduces
between one pair of timestamps, divided by the burst's length; the sample is the
slowest rank's (a collective is done when its last participant is). The burst
length comes from a warm-up estimate that every rank agrees on, so that small
messages are not dominated by one launch and one host wait each.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.distributed as dist

from accelbench.kit.ranks import Rank, rank_main
from accelbench.measure.timer import clock_name, time_burst

#: a burst lasts about this long (bounded by MAX_BURST calls)
BURST_SECONDS, MAX_BURST = 1e-3, 100


def _agree(value: float, op: Any, device: torch.device) -> float:
    """The value every rank agrees on (the slowest time, whether all are done)."""
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=op)
    return float(t.item())


def _one_size(size: int, rank: Rank, min_reps: int, min_time: float) -> dict[str, Any]:
    numel = max(1, size // 4)
    t = torch.full((numel,), float(rank.rank + 1), device=rank.device)
    dist.all_reduce(t)  # warm-up, and the correctness check
    correct = bool(torch.all(t == sum(range(1, rank.world + 1))).item())  # each rank contributed rank + 1
    dev = rank.device
    estimate = _agree(time_burst(lambda: dist.all_reduce(t), dev, 5), dist.ReduceOp.MAX, dev)
    burst = int(min(MAX_BURST, max(1, math.ceil(BURST_SECONDS / max(estimate, 1e-9)))))
    samples: list[float] = []
    start = time.perf_counter()
    while True:
        dist.barrier()
        samples.append(_agree(time_burst(lambda: dist.all_reduce(t), dev, burst), dist.ReduceOp.MAX, dev))
        done = len(samples) >= min_reps and time.perf_counter() - start >= min_time
        if _agree(1.0 if done else 0.0, dist.ReduceOp.MIN, dev) == 1.0 or len(samples) >= 100_000:
            break  # every rank stops at the same iteration
    return {"bytes": numel * 4, "samples": samples, "correct": correct, "burst": burst}


def body(payload: dict[str, Any], rank: Rank) -> dict[str, Any]:
    results = [_one_size(int(s), rank, payload["min_reps"], payload["min_time"]) for s in payload["sizes"]]
    return {
        "world_size": rank.world,
        "backend": payload["backend"],
        "clock": clock_name(rank.device),
        "results": results,
    }


if __name__ == "__main__":
    rank_main(body, backend=lambda payload: payload["backend"])
