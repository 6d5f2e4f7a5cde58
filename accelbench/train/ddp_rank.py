"""One rank of a data-parallel training run; started by torchrun, never imported by the CLI.

Each rank trains a DistributedDataParallel replica on its own synthetic batch
(the per-device batch) and times its windows exactly as a single-device run
does. A window's step time for the system is the slowest rank's (gradients are
all-reduced every step, so no rank finishes a step before the slowest). Rank 0
writes the samples and what the parent needs for the record.
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from accelbench.launch.torchrun import exit_rank, finish_rank, start_rank
from accelbench.train import loop
from accelbench.train.specs import TrainParams
from accelbench.workloads import workload_class


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--params", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--timeout", type=float, default=300)
    args = p.parse_args()
    params = TrainParams(**json.loads(args.params))
    device, local_rank, rank, world = start_rank(params.device, params.threads, args.timeout)
    use_cuda = device.type == "cuda"
    torch.manual_seed(rank)
    workload = workload_class(params.model)()
    model = loop.prepare_model(workload, params, device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    trainer = loop.make_trainer(workload, ddp, params, device, args.batch)
    flops = loop.flops_per_sample(trainer, args.batch)
    if params.compile:
        trainer.model = torch.compile(ddp)
    with loop.PeakMemory(device) as mem:
        measurement, loss = loop.run_windows(trainer, params, lambda step, sec: None)
    samples = torch.tensor(measurement.samples, dtype=torch.float64, device=device)
    dist.all_reduce(samples, op=dist.ReduceOp.MAX)  # the slowest rank sets each window's step time
    peak = torch.tensor([float(mem.peak)], dtype=torch.float64, device=device)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    result = {
        "world_size": world,
        "samples": samples.tolist(),
        "flops_per_sample": flops,
        "peak_memory_bytes": peak.item(),
        "loss": loss,
        "backend": dist.get_backend(),
        "device_type": device.type,
        "threads": torch.get_num_threads(),
    }
    finish_rank(rank, args.out, result)


if __name__ == "__main__":
    main()
    exit_rank()
