"""A model's FLOPs a sample, counted before it runs: training's and serving's cost models both read them."""

from __future__ import annotations

import functools

from accelbench.workloads import workload_class


@functools.lru_cache(maxsize=64)
def vision_flops(model: str, scale: str, train: bool) -> float | None:
    """FLOPs of one sample (forward, + backward when ``train``), counted by torch's FlopCounterMode as the
    training record counts them, on the meta device (no memory, no time); None where the model cannot be
    followed there."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    workload = workload_class(model)()
    batch = 2  # batch norm needs more than one sample in training
    try:
        with torch.device("meta"):
            net = workload.build(scale)
        data = workload.synthetic_batch(batch, torch.device("meta"), scale)
        with FlopCounterMode(display=False) as counter:
            if train:
                workload.loss(net, data).backward()
            else:
                with torch.no_grad():
                    workload.loss(net, data)
    except Exception:  # noqa: BLE001 - an op the meta device cannot run (a .item()): no count
        return None
    total = counter.get_total_flops()
    return total / batch if total else None
