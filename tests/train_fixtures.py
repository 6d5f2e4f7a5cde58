"""User-defined workloads for the training tests (also an example of the Workload contract)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from accelbench.workloads.base import ModelInfo, Workload


class WideMLP(Workload):
    """About 1 MB of activations and gradients per sample, so memory grows visibly with the batch; a narrow input
    keeps the arithmetic per sample small (a search that fills 512 MiB was 40 s of matrix products at 256 wide)."""

    info = ModelInfo("wide-mlp", "test", "rows", "(batch, 16)", default_batch={"cpu": 8, "gpu": 8})

    def build(self, scale):
        return torch.nn.Sequential(torch.nn.Linear(16, 65536), torch.nn.ReLU(), torch.nn.Linear(65536, 2))

    def synthetic_batch(self, batch_size, device, scale):
        return torch.randn(batch_size, 16, device=device), torch.randint(0, 2, (batch_size,), device=device)

    def loss(self, model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y)


class OomAbove64(Workload):
    """Raises torch's out-of-memory error for batches over 64, as a GPU would."""

    info = ModelInfo("oom-above-64", "test", "rows", "(batch, 8)", default_batch={"cpu": 16, "gpu": 16})

    def build(self, scale):
        return torch.nn.Linear(8, 2)

    def synthetic_batch(self, batch_size, device, scale):
        return torch.randn(batch_size, 8, device=device), torch.randint(0, 2, (batch_size,), device=device)

    def loss(self, model, batch):
        x, y = batch
        if x.shape[0] > 64:
            raise torch.OutOfMemoryError(f"Tried to allocate {x.shape[0]} rows (simulated)")
        return F.cross_entropy(model(x), y)


class NotAWorkload:
    pass


class DiesOnRank1(OomAbove64):
    """Rank 1 of a distributed run dies in its first step, as a crashed GPU worker would."""

    info = ModelInfo("dies-on-rank-1", "test", "rows", "(batch, 8)", default_batch={"cpu": 8, "gpu": 8})

    def loss(self, model, batch):
        import os

        import torch.distributed as dist

        if dist.is_initialized() and dist.get_rank() == 1:
            os._exit(13)
        return super().loss(model, batch)


def image_folders(root: Path, classes: int = 3, per_class: int = 8, size: tuple[int, int] = (48, 40)) -> Path:
    """Class folders of random-pixel JPEGs, as ImageFolder reads them (torchvision decodes them like photos)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in range(classes):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / f"class{c}" / f"{i}.jpg", quality=90)
    return root
