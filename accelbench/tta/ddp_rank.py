"""One rank of a data-parallel time-to-accuracy run; started by torchrun, never imported by the CLI.

Every rank stages the data, trains a DistributedDataParallel replica on its
shard of each epoch (the per-device batch) and evaluates; rank 0 alone writes
the MLPerf logs and the seeds' outcomes for the parent.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from torch.nn.parallel import DistributedDataParallel

from accelbench.launch.torchrun import exit_rank, finish_rank, start_rank
from accelbench.registry import RunContext
from accelbench.tta.loop import precision_of
from accelbench.tta.run import make_job, run_seeds
from accelbench.tta.specs import TtaParams

#: how long a rank waits for the others in a collective (an ImageNet evaluation on one rank can take minutes)
RANK_TIMEOUT_S = 1800.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--params", required=True)
    p.add_argument("--seeds", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--log-dir", required=True)
    args = p.parse_args()
    params = TtaParams(**json.loads(args.params))
    device, local_rank, rank, world = start_rank(params.device, params.threads, RANK_TIMEOUT_S)
    use_cuda = device.type == "cuda"
    ctx = RunContext(Path(args.log_dir), (lambda m: print(m, flush=True)) if rank == 0 else (lambda m: None))
    job = make_job(params, device, ctx, rank=rank, world=world)
    job.wrap = lambda m: DistributedDataParallel(m, device_ids=[local_rank] if use_cuda else None)
    runs = run_seeds(job, [int(s) for s in args.seeds.split(",")], Path(args.log_dir) if rank == 0 else None)
    info = {"batch": job.batch, "target": job.target, "max_epochs": job.max_epochs}
    info["precision"] = precision_of(params, job.recipe, device)
    finish_rank(rank, args.out, {"runs": [r.to_dict() for r in runs], "job": info})
    exit_rank()


if __name__ == "__main__":
    main()
