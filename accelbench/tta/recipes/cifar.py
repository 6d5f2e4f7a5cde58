"""CIFAR-10 to 94%, after David Page's DAWNBench-record ResNet-9 ("How to train your ResNet", 2018).

The recipe follows the published one (the network, batch 512, Nesterov SGD, a one-cycle rate over 24 epochs,
label smoothing, crops, flips and cutout; half precision on a GPU), which reached 94% in 24 epochs; the details
are in docs/tta.md. It cannot be timed without a GPU; on a CPU it runs, slowly."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.datasets.training import TensorSplit, check_cifar10, cifar10
from accelbench.kit.step import fused_kwargs
from accelbench.tta.recipes.base import Schedule, TensorClassification

if TYPE_CHECKING:
    import torch

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2471, 0.2435, 0.2616)


def resnet9(width: int = 64, classes: int = 10) -> "torch.nn.Module":
    from torch import nn

    def block(c_in: int, c_out: int, pool: bool = False) -> nn.Sequential:
        layers = [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]
        if pool:
            layers.insert(1, nn.MaxPool2d(2))
        return nn.Sequential(*layers)

    class Residual(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.inner = nn.Sequential(block(c, c), block(c, c))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = x + self.inner(x)
            return out

    class Scale(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 0.125

    w = width
    return nn.Sequential(
        block(3, w),
        block(w, 2 * w, pool=True),
        Residual(2 * w),
        block(2 * w, 4 * w, pool=True),
        block(4 * w, 8 * w, pool=True),
        Residual(8 * w),
        nn.AdaptiveMaxPool2d(1),
        nn.Flatten(),
        nn.Linear(8 * w, classes, bias=False),
        Scale(),
    )


class Cifar10(TensorClassification):
    name = "cifar10"
    target = 0.94
    max_epochs = 24
    batch_size = {"cpu": 512, "gpu": 512}
    mlperf_benchmark = "cifar10"
    gpu_precision = "amp_fp16"
    label_smoothing = 0.2
    data_hint = "cifar-10-batches-py: data_batch_1 .. data_batch_5 and test_batch (the python pickle batches)"
    source = "David Page's ResNet-9 DAWNBench recipe: batch 512, Nesterov SGD, one-cycle LR to 0.4, 24 epochs"
    PEAK_LR, PEAK_EPOCH, WEIGHT_DECAY = 0.4, 5, 5e-4

    def check_data(self, data_dir: Path) -> None:
        check_cifar10(data_dir)

    def load(self, data_dir: Path | None, scale: str) -> tuple[TensorSplit, TensorSplit]:
        assert data_dir is not None
        return cifar10(data_dir)

    def normalize(self, x: "torch.Tensor") -> "torch.Tensor":
        import torch

        mean = torch.tensor(MEAN, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(STD, device=x.device).view(1, 3, 1, 1)
        return (x - mean) / std

    def augment(self, x: "torch.Tensor", generator: "torch.Generator") -> "torch.Tensor":
        """Random 32x32 crops of the 4-pixel reflection-padded images, horizontal flips, and one 8x8 cutout each."""
        import torch
        import torch.nn.functional as F

        n, dev = x.shape[0], x.device  # the draws come from the seed's CPU generator; the work runs where x is
        padded = F.pad(x, (4, 4, 4, 4), mode="reflect")
        dx, dy = torch.randint(0, 9, (2, n), generator=generator).to(dev)
        out = _crop(padded, dy, dx)
        flip = (torch.rand(n, generator=generator) < 0.5).to(dev)
        out = torch.where(flip.view(n, 1, 1, 1), out.flip(3), out)
        cy, cx = torch.randint(0, 32, (2, n), generator=generator).to(dev)
        ys, xs = torch.arange(32, device=dev).view(1, 32, 1), torch.arange(32, device=dev).view(1, 1, 32)
        hole = ((ys - cy.view(n, 1, 1)).abs() < 4) & ((xs - cx.view(n, 1, 1)).abs() < 4)
        return out.masked_fill(hole.unsqueeze(1), 0.0)

    def build(self, data: Any, scale: str) -> "torch.nn.Module":
        return resnet9(64 if scale == "full" else 8)

    def schedule(self, model: Any, global_batch: int, steps_per_epoch: int, epochs: int) -> Schedule:
        import torch

        # Page's lr and weight decay are per-sample: the sum-of-losses convention; with a mean loss, scale by batch
        lr0 = self.PEAK_LR
        opt = torch.optim.SGD(
            model.parameters(),
            lr=0.0,
            momentum=0.9,
            nesterov=True,
            weight_decay=self.WEIGHT_DECAY * global_batch / 512,
            **fused_kwargs(next(model.parameters()).device),  # no host sync per step under GradScaler
        )
        total, peak = max(1, epochs * steps_per_epoch), self.PEAK_EPOCH * steps_per_epoch

        def lr_at(i: int) -> float:  # one cycle: linear up to the peak epoch, linear down to 0 at the end
            return lr0 * i / peak if i < peak else lr0 * max(0.0, (total - i) / max(1, total - peak))

        hyper = {"opt_name": "sgd_nesterov", "opt_base_learning_rate": lr0}
        hyper |= {"opt_learning_rate_warmup_epochs": self.PEAK_EPOCH, "opt_weight_decay": self.WEIGHT_DECAY}
        return Schedule(opt, lr_at, hyper)


def _crop(padded: "torch.Tensor", dy: "torch.Tensor", dx: "torch.Tensor") -> "torch.Tensor":
    """The 32x32 window at (dy, dx) of each padded image, in one gather (no Python loop over the batch)."""
    import torch

    n, c = padded.shape[:2]
    span = torch.arange(32, device=padded.device)
    rows = (dy.view(n, 1) + span).view(n, 1, 32, 1)
    cols = (dx.view(n, 1) + span).view(n, 1, 1, 32)
    batch = torch.arange(n, device=padded.device).view(n, 1, 1, 1)
    chans = torch.arange(c, device=padded.device).view(1, c, 1, 1)
    return padded[batch, chans, rows, cols]
