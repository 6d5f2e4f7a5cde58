"""One rank of a sharded decoder training run; started by the kit's launcher, never imported by the CLI.

Each rank trains its shard (FSDP2) or replica (DDP) on its own synthetic tokens through
:func:`accelbench.train.llm.body.train`; each window's time is the slowest rank's, the memory the largest
rank's. Rank 0's report goes back to the parent.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from accelbench.kit.ranks import Rank, rank_main
from accelbench.train.llm.body import train
from accelbench.train.llm.specs import LLMTrainParams


def _max(values: list[float], device: torch.device) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(v) for v in t.tolist()]


def body(payload: dict[str, Any], rank: Rank) -> dict[str, Any]:
    params = LLMTrainParams(**payload["params"])
    report = train(params, rank.device, rank.rank, rank.world)
    if "oom" in report:  # the others wait in a collective: torchrun stops them when this rank fails
        raise MemoryError(f"rank {rank.rank} ran out of memory: {report['oom']}")
    report["samples"] = _max(report["samples"], rank.device)
    memory = [float(report["peak_memory_bytes"]), float(report["peak_reserved_bytes"] or 0)]
    report["peak_memory_bytes"], reserved = _max(memory, rank.device)
    report["peak_reserved_bytes"] = reserved or None
    return report | {"world_size": rank.world, "backend": dist.get_backend(), "threads": torch.get_num_threads()}


if __name__ == "__main__":
    rank_main(body)
