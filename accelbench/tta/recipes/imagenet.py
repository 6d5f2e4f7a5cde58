"""ImageNet to 75.9% top-1 with ResNet-50 v1.5: MLPerf Training's ``resnet`` benchmark (SGD variant).

The hyper-parameters follow the ruleset-4.0.0 closed rules for SGD that the
compliance checker enforces: a base learning rate that is a multiple of 0.001
(0.256 per 256 images, scaled linearly with the global batch), linear warm-up,
polynomial decay of power 2 to an end rate of 0.0001, momentum 0.875, weight
decay 5e-5 (a power-of-two multiple of 1e-4), label smoothing 0.1; evaluation
every 4 epochs, as MLPerf's reference does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from accelbench.datasets.training import check_imagenet, imagenet
from accelbench.devices.kind import kind_of
from accelbench.tta.recipes.base import Recipe, Schedule, classification_loss, loader_workers

if TYPE_CHECKING:
    import torch


class ImageNet(Recipe):
    name = "imagenet"
    target = 0.759
    max_epochs = 41
    batch_size = {"cpu": 32, "gpu": 256}
    eval_every = 4
    mlperf_benchmark = "resnet"
    gpu_precision = "amp_bf16"
    data_hint = "train/ and val/ folders with one sub-folder per class of JPEG images (ImageFolder layout)"
    source = "ResNet-50 v1.5 (torchvision), SGD momentum 0.875, poly(2) decay, label smoothing 0.1: MLPerf rules"
    BASE_LR_PER_256, END_LR, WARMUP_EPOCHS, MOMENTUM, WEIGHT_DECAY = 0.256, 0.0001, 2, 0.875, 5e-5
    #: DataLoader worker processes per rank
    workers = 8

    def check_data(self, data_dir: Path) -> None:
        check_imagenet(data_dir)

    def load(self, data_dir: Path | None, scale: str) -> tuple[Any, Any]:
        assert data_dir is not None
        return imagenet(data_dir, 224 if scale == "full" else 64)

    def build(self, data: Any, scale: str) -> "torch.nn.Module":
        import torchvision

        model: torch.nn.Module = torchvision.models.resnet50(weights=None, num_classes=len(data[0].classes))
        return model

    def steps_per_epoch(self, train: Any, global_batch: int) -> int:
        return max(1, len(train) // global_batch)

    def base_lr(self, global_batch: int) -> float:
        return round(self.BASE_LR_PER_256 * global_batch / 256, 3) or 0.001

    def schedule(self, model: Any, global_batch: int, steps_per_epoch: int, epochs: int) -> Schedule:
        import torch

        decay: list[torch.nn.Parameter] = []
        no_decay: list[torch.nn.Parameter] = []
        for _name, p in model.named_parameters():
            (no_decay if p.ndim <= 1 else decay).append(p)  # no weight decay on BN and biases, as the reference
        base = self.base_lr(global_batch)
        opt = torch.optim.SGD(
            [{"params": decay, "weight_decay": self.WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
            lr=base,
            momentum=self.MOMENTUM,
        )
        warm = self.WARMUP_EPOCHS * steps_per_epoch
        decay_steps = max(1, epochs * steps_per_epoch - warm)

        def lr_at(i: int) -> float:  # linear warm-up, then polynomial (power 2) decay to the end rate
            if i < warm:
                return base * (i + 1) / warm
            frac = min(1.0, (i - warm) / decay_steps)
            return (base - self.END_LR) * (1 - frac) ** 2 + self.END_LR

        hyper = {
            "opt_name": "sgd",
            "sgd_opt_base_learning_rate": base,
            "sgd_opt_end_learning_rate": self.END_LR,
            "sgd_opt_learning_rate_decay_poly_power": 2,
            "sgd_opt_learning_rate_decay_steps": decay_steps,
            "sgd_opt_weight_decay": self.WEIGHT_DECAY,
            "sgd_opt_momentum": self.MOMENTUM,
            "opt_learning_rate_warmup_epochs": self.WARMUP_EPOCHS,
            "model_bn_span": None,  # filled by the loop: the per-device batch
        }
        return Schedule(opt, lr_at, hyper)

    def _loader(self, data: Any, batch: int, shuffle_seed: int, rank: int, world: int, device: "torch.device") -> Any:
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        workers = loader_workers(self.workers) if len(data) > 256 else 0
        sampler: DistributedSampler[Any] = DistributedSampler(
            data,
            num_replicas=world,
            rank=rank,
            shuffle=True,
            seed=shuffle_seed,
            drop_last=True,
        )
        loader = DataLoader(
            data,
            batch_size=batch,
            sampler=sampler,
            num_workers=workers,
            pin_memory=workers > 0 and kind_of(device).pin_memory,
            persistent_workers=workers > 0,
        )
        return sampler, loader

    def batches(
        self, train: Any, batch: int, epoch: int, seed: int, rank: int, world: int, device: "torch.device"
    ) -> Iterator[tuple[Any, ...]]:
        sampler, loader = self.kept.get(
            train, ("train", batch, rank, world), lambda: self._loader(train, batch, seed, rank, world, device)
        )
        sampler.seed = seed  # one loader for every seed: the sampler, in this process, says the order
        sampler.set_epoch(epoch)
        for x, y in loader:
            yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    label_smoothing = 0.1

    def loss(self, model: "torch.nn.Module", batch: tuple[Any, ...]) -> "torch.Tensor":
        return classification_loss(model, batch, self.label_smoothing)

    def evaluate(
        self, model: "torch.nn.Module", val: Any, device: "torch.device", rank: int = 0, world: int = 1
    ) -> tuple[float, int]:
        import torch
        from torch.utils.data import DataLoader, Subset

        def build() -> Any:
            share = Subset(val, range(rank, len(val), world))  # not DistributedSampler: it pads with repeats
            workers = loader_workers(self.workers) if len(share) > 256 else 0
            pin = workers > 0 and kind_of(device).pin_memory
            return DataLoader(
                share, batch_size=256, num_workers=workers, pin_memory=pin, persistent_workers=workers > 0
            )

        loader = self.kept.get(val, ("val", rank, world), build)
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += int((model(x.to(device, non_blocking=True)).argmax(1).cpu() == y).sum())
        return float(correct), len(loader.dataset)
