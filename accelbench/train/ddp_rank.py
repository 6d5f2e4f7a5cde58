"""One rank of a data-parallel training run; started by the kit's launcher, never imported by the CLI.

Each rank trains a DistributedDataParallel replica on its own synthetic batch
(the per-device batch) and times its windows exactly as a single-device run
does, under the same matmul/cuDNN precision mode. A window's step time for the
system is the slowest rank's (gradients are all-reduced every step, so no rank
finishes a step before the slowest). Rank 0's report goes back to the parent.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import set_numeric_mode
from accelbench.kit.ranks import Rank, rank_main
from accelbench.train import loop
from accelbench.train.specs import TrainParams
from accelbench.workloads import workload_class


def device_ids(device: torch.device) -> list[int] | None:
    """DDP's ``device_ids``: the one accelerator device a rank owns (its local rank's); None on the host, and for
    a kind whose tensors live in host memory (an unindexed device), as DDP requires of a CPU module."""
    return [device.index] if kind_of(device).accelerator and device.index is not None else None


def body(payload: dict[str, Any], rank: Rank) -> dict[str, Any]:
    params = TrainParams(**payload["params"])
    device = rank.device
    torch.manual_seed(rank.rank)
    workload = workload_class(params.model)()
    set_numeric_mode(device, params.precision)  # as prepare() does for one device: the scaling table's points agree
    model = loop.prepare_model(workload, params, device)
    ddp = DistributedDataParallel(model, device_ids=device_ids(device))
    trainer = loop.make_trainer(workload, ddp, params, device, payload["batch"])
    if params.data == "real":  # each rank reads its own shard (DistributedSampler)
        trainer.use_real_data(params, payload["batch"], payload["workers"], rank.rank, rank.world)
    flops = loop.flops_per_sample(trainer, payload["batch"])
    if params.compile:
        trainer.model = loop.compiled(ddp, params)
    with loop.PeakMemory(device) as mem:
        measurement, loss = loop.run_windows(trainer, params, lambda step, sec: None)
    samples = torch.tensor(measurement.samples, dtype=torch.float64, device=device)
    dist.all_reduce(samples, op=dist.ReduceOp.MAX)  # the slowest rank sets each window's step time
    peak = torch.tensor([float(mem.peak)], dtype=torch.float64, device=device)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    waits = torch.tensor(trainer.window_waits or [0.0] * len(measurement.samples), dtype=torch.float64, device=device)
    dist.all_reduce(waits, op=dist.ReduceOp.MAX)  # the rank that waited longest for data holds the others
    return {
        "world_size": rank.world,
        "samples": samples.tolist(),
        "clock": measurement.clock,
        "flops_per_sample": flops,
        "peak_memory_bytes": peak.item(),
        "input_waits": waits.tolist() if trainer.pipeline is not None else [],
        "pipeline": trainer.pipeline.setup if trainer.pipeline is not None else None,
        "loss": loss,
        "backend": dist.get_backend(),
        "device_type": device.type,
        "threads": torch.get_num_threads(),
    }


if __name__ == "__main__":
    rank_main(body)
