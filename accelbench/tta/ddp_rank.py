"""One rank of a data-parallel time-to-accuracy run; started by the kit's launcher, never imported by the CLI.

Every rank stages the data, trains a DistributedDataParallel replica on its
shard of each epoch (the per-device batch) and evaluates; rank 0 alone writes
the MLPerf logs, and its seeds' outcomes are the report.
"""

from __future__ import annotations

from typing import Any

from torch.nn.parallel import DistributedDataParallel

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import set_numeric_mode
from accelbench.kit.context import RunContext
from accelbench.kit.ranks import Rank, rank_main
from accelbench.tta.loop import precision_of
from accelbench.tta.recipes import recipe
from accelbench.tta.run import make_job, run_seeds
from accelbench.tta.specs import TtaParams


def body(payload: dict[str, Any], rank: Rank) -> dict[str, Any]:
    params = TtaParams(**payload["params"])
    device = rank.device
    set_numeric_mode(device, precision_of(params, recipe(params.workload), device))  # as prepare() does
    job = make_job(params, device, RunContext(rank.log_dir, rank.progress), rank=rank.rank, world=rank.world)
    # the one accelerator device this rank owns; none on the host or for a kind whose tensors are in host memory
    ids = [device.index] if kind_of(device).accelerator and device.index is not None else None
    job.wrap = lambda m: DistributedDataParallel(m, device_ids=ids)
    runs = run_seeds(job, [int(s) for s in payload["seeds"]], rank.log_dir if rank.rank == 0 else None)
    info = {"batch": job.batch, "target": job.target, "more_targets": job.more, "max_epochs": job.max_epochs}
    info["precision"] = precision_of(params, job.recipe, device)
    return {"runs": [r.to_dict() for r in runs], "job": info}


if __name__ == "__main__":
    rank_main(body)
