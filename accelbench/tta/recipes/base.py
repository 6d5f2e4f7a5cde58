"""The recipe contract: what time-to-accuracy needs from a workload beyond what throughput needs.

A recipe names its quality metric and default target, loads its real data from
the standard on-disk format, builds the model, its optimizer and schedule,
yields training batches for one epoch (each rank its own shard), and evaluates.
Its hyper-parameters are what the MLPerf log records. The loop in
:mod:`accelbench.tta.loop` does the rest (clock, evaluation cadence, logs).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator

if TYPE_CHECKING:
    import torch

    from accelbench.datasets.training import TensorSplit


def loader_workers(most: int) -> int:
    """DataLoader workers for this rank: the cores this process may use, shared by the node's ranks.

    Not torch's thread count: torchrun sets OMP_NUM_THREADS=1 in every rank, which would leave decoding
    to the training process alone. One core stays with the training process.
    """
    import os

    from accelbench.system.cpu import usable_cores

    cores = usable_cores()
    ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # set by torchrun for every rank
    return min(most, max(0, cores // ranks_here - 1))


class KeptLoaders:
    """A recipe's DataLoaders, one per data set and key (a shard, a batch size), kept for the run with their workers.

    Built afresh each epoch, a loader starts its worker processes each epoch, inside the timed epoch: a process
    start each and, under the spawn and forkserver start methods (forkserver is Python 3.14's default on Linux),
    the data set pickled to every worker: COCO's annotations for 117k images. Kept (``persistent_workers``), the
    workers start once; what changes from epoch to epoch (order, shard, flips) lives in the sampler, which stays
    in the training process.
    """

    def __init__(self) -> None:
        self._held: dict[tuple[Any, ...], tuple[Any, Any]] = {}

    def get(self, data: Any, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """The loader kept for ``data`` under ``key``: built by ``build`` the first time, or for another data set."""
        held = self._held.get(key)
        if held is None or held[0] is not data:
            held = self._held[key] = (data, build())
        return held[1]


class EpochBatches:
    """A batch sampler whose batches the recipe sets before each epoch: a kept loader's order, shard and flips."""

    def __init__(self) -> None:
        self.batches: list[list[Any]] = []

    def __iter__(self) -> Iterator[list[Any]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


@dataclass
class Schedule:
    """An optimizer, its learning rate as a function of the step (None: constant), and what MLPerf's log records."""

    optimizer: "torch.optim.Optimizer"
    lr_at: Callable[[int], float] | None = None
    hyperparameters: dict[str, Any] = field(default_factory=dict)

    def step(self, index: int) -> None:
        """Set the learning rate of step ``index`` before it runs."""
        if self.lr_at is not None:
            lr = self.lr_at(index)
            for group in self.optimizer.param_groups:
                group["lr"] = lr


class Recipe(ABC):
    name: ClassVar[str]
    metric: ClassVar[str] = "top1"
    metric_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    target: ClassVar[float]
    #: further metrics a run must reach as well, each with its default target (Mask R-CNN's mask AP beside its box
    #: AP, MLPerf's two-target rule): :meth:`combine` then returns every metric by name
    more_targets: ClassVar[dict[str, float]] = {}
    #: the key of each metric in MLPerf's eval_accuracy where a run is scored on several (Mask R-CNN: BBOX, SEGM)
    mlperf_keys: ClassVar[dict[str, str]] = {}
    #: whether the quality metric improves downward (a validation loss): the target is reached at or below it
    lower_is_better: ClassVar[bool] = False
    max_epochs: ClassVar[int]
    #: per-device batch size by device class ("gpu", "cpu": a device kind's ``batch_class``; an old "cuda" key is
    #: read as "gpu")
    batch_size: ClassVar[dict[str, int]]
    #: evaluate every this many epochs (MLPerf ResNet: every 4)
    eval_every: ClassVar[int] = 1
    #: the value of MLPerf's submission_benchmark key
    mlperf_benchmark: ClassVar[str]
    #: the default precision on an accelerator (CPUs train in fp32)
    gpu_precision: ClassVar[str] = "fp32"
    needs_data_dir: ClassVar[bool] = True
    #: (module, pip extra) the recipe imports beyond accelbench's own dependencies: a run without one is skipped
    needs: ClassVar[tuple[tuple[str, str], ...]] = ()
    data_hint: ClassVar[str] = ""
    source: ClassVar[str] = ""

    @cached_property
    def kept(self) -> KeptLoaders:
        """This recipe's DataLoaders kept from epoch to epoch (their workers started once a run)."""
        return KeptLoaders()

    def missing(self) -> str | None:
        """Why a library the recipe needs is not installed, with how to get it; None when all are."""
        import importlib.util

        for module, extra in self.needs:
            if importlib.util.find_spec(module) is None:
                return f"{self.name} needs {module} (pip install 'accelbench[{extra}]')"
        return None

    def evaluates_at(self, epoch: int) -> bool:
        """Whether the reference evaluates after ``epoch`` (counted from 1): every :attr:`eval_every` epochs by
        default; a recipe whose reference evaluates at listed epochs (MLPerf v0.5's SSD) says so. Evaluation time
        counts in the time to target, so the cadence is the reference's. The last allowed epoch always is."""
        return epoch % self.eval_every == 0

    def targets(self, target: float = 0.0, second: float = 0.0) -> dict[str, float]:
        """Every metric's target: ``target`` for :attr:`metric` and ``second`` for the one in :attr:`more_targets`
        (0: the recipe's own)."""
        more = dict(self.more_targets)
        if second:
            [name] = more  # the params allow a second target only where the recipe has exactly one more metric
            more[name] = second
        return {self.metric: target or self.target} | more

    def check_data(self, data_dir: Path) -> None:
        """Fail with a usage error naming the expected files, cheaply (no data read): run before any training."""
        return None  # a recipe without a data directory (digits) has nothing to check

    @abstractmethod
    def load(self, data_dir: Path | None, scale: str) -> tuple[Any, Any]:
        """(train, evaluation) data, staged before the clock starts."""

    @abstractmethod
    def build(self, data: Any, scale: str) -> "torch.nn.Module": ...

    @abstractmethod
    def schedule(self, model: "torch.nn.Module", global_batch: int, steps_per_epoch: int, epochs: int) -> Schedule: ...

    @abstractmethod
    def batches(
        self, train: Any, batch: int, epoch: int, seed: int, rank: int, world: int, device: "torch.device"
    ) -> Iterator[tuple[Any, ...]]:
        """One epoch of this rank's batches, shuffled by (seed, epoch)."""

    @abstractmethod
    def steps_per_epoch(self, train: Any, global_batch: int) -> int: ...

    @abstractmethod
    def loss(self, model: "torch.nn.Module", batch: tuple[Any, ...]) -> "torch.Tensor": ...

    def evaluate(
        self, model: "torch.nn.Module", val: Any, device: "torch.device", rank: int = 0, world: int = 1
    ) -> tuple[float, int]:
        """(sum of the per-sample scores, samples) over this rank's share of ``val`` (every ``world``-th sample
        from ``rank``): each rank evaluates 1/world of the set and the loop adds the ranks' sums, so
        evaluation time shrinks with the device count as training time does. A recipe whose metric is not a
        mean of per-sample scores (BLEU, COCO mAP) implements :meth:`evaluate_part` and :meth:`combine`."""
        raise NotImplementedError(f"{type(self).__name__} implements neither evaluate nor evaluate_part")

    def evaluate_part(
        self, model: "torch.nn.Module", val: Any, device: "torch.device", rank: int = 0, world: int = 1
    ) -> Any:
        """This rank's share of the evaluation, in whatever :meth:`combine` reads (picklable: the ranks' parts
        are gathered): by default :meth:`evaluate`'s (sum, count)."""
        return self.evaluate(model, val, device, rank, world)

    def combine(self, parts: list[Any]) -> float | dict[str, float]:
        """The quality from every rank's part (a corpus BLEU from summed n-gram counts, a COCO mAP from every
        rank's detections): by default the summed scores over the summed count. A recipe with
        :attr:`more_targets` returns each metric by name, its own :attr:`metric` among them."""
        quality: float = sum(p[0] for p in parts) / sum(p[1] for p in parts)
        return quality

    def stage(self, split: Any, device: "torch.device") -> Any:
        """The training split where batches are cut from (before the clock, as MLPerf's data staging)."""
        return split

    def train_samples(self, train: Any) -> int:
        return len(train)

    def eval_samples(self, val: Any) -> int:
        return len(val)


def classification_loss(model: "torch.nn.Module", batch: tuple[Any, ...], smoothing: float) -> "torch.Tensor":
    """An image classifier's loss: cross-entropy on the labels, label-smoothed as its recipe publishes."""
    import torch.nn.functional as F

    x, y = batch
    return F.cross_entropy(model(x), y, label_smoothing=smoothing)


class TensorClassification(Recipe):
    """Image classification on a set staged as tensors: shuffled batches, optional augmentation, top-1."""

    label_smoothing: ClassVar[float] = 0.0

    def steps_per_epoch(self, train: "TensorSplit", global_batch: int) -> int:
        return max(1, len(train) // global_batch)

    def augment(self, x: "torch.Tensor", generator: "torch.Generator") -> "torch.Tensor":
        return x

    def normalize(self, x: "torch.Tensor") -> "torch.Tensor":
        return x

    def batches(
        self, train: Any, batch: int, epoch: int, seed: int, rank: int, world: int, device: "torch.device"
    ) -> Iterator[tuple[Any, ...]]:
        import torch

        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        order = torch.randperm(len(train), generator=g).to(train.x.device)  # staged on the device on a GPU
        steps = self.steps_per_epoch(train, batch * world)
        for s in range(steps):
            idx = order[(s * world + rank) * batch : (s * world + rank + 1) * batch]
            x = self.augment(train.x[idx], g)
            yield self.normalize(x).to(device, non_blocking=True), train.y[idx].to(device, non_blocking=True)

    def stage(self, split: Any, device: "torch.device") -> Any:
        """The training split on the device (a GPU): batches are then cut and augmented there, not by the host."""
        from accelbench.datasets.training import TensorSplit

        if device.type == "cpu":
            return split
        return TensorSplit(split.x.to(device), split.y.to(device))

    def loss(self, model: "torch.nn.Module", batch: tuple[Any, ...]) -> "torch.Tensor":
        return classification_loss(model, batch, self.label_smoothing)

    def evaluate(
        self, model: "torch.nn.Module", val: Any, device: "torch.device", rank: int = 0, world: int = 1
    ) -> tuple[float, int]:
        import torch

        xs, ys = val.x[rank::world], val.y[rank::world]
        correct = 0
        with torch.no_grad():
            for start in range(0, len(xs), 1024):
                x = self.normalize(xs[start : start + 1024]).to(device)
                correct += int((model(x).argmax(1) == ys[start : start + 1024].to(x.device)).sum())
        return float(correct), len(xs)
