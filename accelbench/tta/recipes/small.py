"""Handwritten digits: scikit-learn's bundled set (the embedded default) and MNIST from its IDX files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.datasets.training import TensorSplit, check_mnist, digits, mnist
from accelbench.tta.recipes.base import Schedule, TensorClassification

if TYPE_CHECKING:
    import torch


def small_cnn(side: int, width: int = 32) -> "torch.nn.Module":
    """Two 3x3 conv + BN + ReLU layers, a 2x2 max-pool, dropout and a 128-wide classifier: Keras' MNIST CNN, with BN."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.BatchNorm2d(2 * width),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(0.25),
        nn.Linear(2 * width * (side // 2) ** 2, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


class _AdamW:
    lr = 3e-3
    weight_decay = 1e-4

    def schedule(self, model: Any, global_batch: int, steps_per_epoch: int, epochs: int) -> Schedule:
        import torch

        opt = torch.optim.AdamW(model.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        hyper = {"opt_name": "adamw", "opt_base_learning_rate": self.lr, "opt_weight_decay": self.weight_decay}
        return Schedule(opt, None, hyper)


class Digits(_AdamW, TensorClassification):
    name = "digits"
    target = 0.98
    max_epochs = 30
    batch_size = {"cpu": 64, "gpu": 64}
    mlperf_benchmark = "digits"
    needs_data_dir = False
    data_hint = "none: scikit-learn's bundled handwritten digits (1,797 8x8 images; 360 held out for evaluation)"
    source = "a small CNN (two 3x3 conv layers, BN, max-pool, 128-wide dense) with AdamW, lr 3e-3, batch 64"

    def load(self, data_dir: Path | None, scale: str) -> tuple[TensorSplit, TensorSplit]:
        train, test = digits()
        mean, std = train.x.mean(), train.x.std()
        return TensorSplit((train.x - mean) / std, train.y), TensorSplit((test.x - mean) / std, test.y)

    def build(self, data: Any, scale: str) -> "torch.nn.Module":
        return small_cnn(8)


class Mnist(_AdamW, TensorClassification):
    name = "mnist"
    target = 0.99
    max_epochs = 12
    batch_size = {"cpu": 128, "gpu": 128}
    mlperf_benchmark = "mnist"
    lr = 2e-3
    data_hint = "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte"
    source = "the digits CNN at 28x28 with AdamW, lr 2e-3, batch 128 (about 99.2% after a few epochs)"
    MEAN, STD = 0.1307, 0.3081  # MNIST's pixel statistics

    def check_data(self, data_dir: Path) -> None:
        check_mnist(data_dir)

    def load(self, data_dir: Path | None, scale: str) -> tuple[TensorSplit, TensorSplit]:
        assert data_dir is not None
        return mnist(data_dir)

    def normalize(self, x: "torch.Tensor") -> "torch.Tensor":
        return (x - self.MEAN) / self.STD

    def build(self, data: Any, scale: str) -> "torch.nn.Module":
        return small_cnn(28)
