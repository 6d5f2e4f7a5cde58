"""COCO to its AP targets: SSD (box AP) and Mask R-CNN (box and mask AP), MLPerf Training v0.5's two detectors.

A step trains a torchvision detector on flipped images (boxes and masks mirrored) with the detector's own loss;
each evaluation scores every ``val2017`` image with COCOeval, the ranks' detections together. The targets and
full-scale models are MLPerf's, but nothing is downloaded, so the backbones start from random weights and a run
to the published targets takes correspondingly longer (docs/tta.md, Detection)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, cast

from mlperf_logging.mllog import constants as C

from accelbench.datasets.coco import (
    CocoImages,
    CocoSplit,
    as_lists,
    check_coco_training,
    coco_eval,
    read_split,
    to_results,
)
from accelbench.devices.kind import kind_of
from accelbench.errors import UsageError
from accelbench.tta.recipes.base import EpochBatches, Recipe, Schedule, loader_workers
from accelbench.workloads.detection import small_maskrcnn, small_ssd, ssd300_resnet34

if TYPE_CHECKING:
    import torch
    from torch.utils.data import Dataset

MLPERF_V05 = "MLPerf Training v0.5 rules, quality targets"


class _Coco(Recipe):
    """What both detectors share: COCO's splits, flipped batches, COCOeval over every rank's detections."""

    batch_size = {"cpu": 16, "gpu": 32}
    gpu_precision = "amp_bf16"
    needs = (("pycocotools", "tta"),)
    data_hint = "COCO 2017: annotations/instances_train2017.json, instances_val2017.json, train2017/, val2017/"
    #: the square input by scale (None: images at their own size, the model resizing inside)
    size: ClassVar[dict[str, int | None]]
    #: whether the targets hold instance masks
    masks: ClassVar[bool] = False
    #: DataLoader worker processes per rank, started for sets of more than ``workers_from`` images
    workers: ClassVar[int] = 8
    workers_from: ClassVar[int] = 256
    _scale: str = "full"
    _val: Any = None

    def check_data(self, data_dir: Path) -> None:
        check_coco_training(data_dir)

    def load(self, data_dir: Path | None, scale: str) -> tuple[CocoSplit, CocoSplit]:
        assert data_dir is not None
        self._scale = scale
        train = read_split(data_dir, "train2017")
        val = read_split(data_dir, "val2017", categories=list(train.label_of))
        self._val = val  # what combine scores against
        return train, val

    def steps_per_epoch(self, train: CocoSplit, global_batch: int) -> int:
        """Whole global batches (every rank takes as many steps, each with a full batch)."""
        if len(train) < global_batch:
            raise UsageError(
                f"train2017 has {len(train)} images with an object, fewer than one global batch of {global_batch}: "
                "lower --batch-size"
            )
        return len(train) // global_batch

    def _loader(self, images: CocoImages, device: "torch.device", count: int, **batching: Any) -> Any:
        """A loader of ``images`` (``count`` a pass), decoded by DataLoader workers where the set is large enough to
        pay for starting them (a GPU would otherwise wait on JPEG decoding in the training process), in pinned
        memory where the device kind copies from it asynchronously. Its workers persist: it is kept for the run."""
        from torch.utils.data import DataLoader

        workers = loader_workers(self.workers) if count > self.workers_from else 0
        pin = workers > 0 and kind_of(device).pin_memory
        return DataLoader(
            cast("Dataset[Any]", images),  # a map-style set (__getitem__, __len__) without Dataset's base class
            num_workers=workers,
            collate_fn=as_lists,
            pin_memory=pin,
            persistent_workers=workers > 0,
            **batching,
        )

    def batches(
        self, train: Any, batch: int, epoch: int, seed: int, rank: int, world: int, device: "torch.device"
    ) -> Iterator[tuple[Any, ...]]:
        import torch

        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        order = torch.randperm(len(train), generator=g).tolist()
        flips = (torch.rand(len(train), generator=g) < 0.5).tolist()
        steps = [
            [(i, flips[i]) for i in order[(s * world + rank) * batch : (s * world + rank + 1) * batch]]
            for s in range(self.steps_per_epoch(train, batch * world))
        ]  # this rank's share of each step, whole batches only: (image position, flipped)

        def build() -> Any:
            images = CocoImages(train, train.image_ids, self.size[self._scale], self.masks)
            return self._loader(images, device, len(steps) * batch, batch_sampler=EpochBatches())

        loader = self.kept.get(train, ("train", batch, rank, world), build)
        loader.batch_sampler.batches = steps
        for ims, targets in loader:
            ims = [im.to(device, non_blocking=True) for im in ims]
            yield ims, [{k: v.to(device, non_blocking=True) for k, v in t.items()} for t in targets]

    def loss(self, model: "torch.nn.Module", batch: tuple[Any, ...]) -> "torch.Tensor":
        images, targets = batch
        total: torch.Tensor = sum(model(images, targets).values())  # torchvision's losses by name
        return total

    def evaluate_part(
        self, model: "torch.nn.Module", val: Any, device: "torch.device", rank: int = 0, world: int = 1
    ) -> list[dict[str, Any]]:
        """This rank's detections of every ``world``-th image, in COCO's results format (with masks, RLE)."""
        import torch

        ids = val.image_ids[rank::world]
        size = self.size[self._scale]
        results: list[dict[str, Any]] = []
        with torch.no_grad():
            done = 0
            loader = self.kept.get(
                val,
                ("val", rank, world),
                lambda: self._loader(CocoImages(val, ids, size), device, len(ids), batch_size=32),
            )
            for images, _ in loader:
                outputs = model([im.to(device, non_blocking=True) for im in images])
                results += to_results(val, ids[done : done + len(images)], outputs, size)
                done += len(images)
        return results

    def combine(self, parts: list[Any]) -> float | dict[str, float]:
        return coco_eval(self._val, [r for p in parts for r in p])

    def train_samples(self, train: CocoSplit) -> int:
        return len(train)

    def eval_samples(self, val: CocoSplit) -> int:
        return len(val)

    def _stepped_sgd(
        self,
        model: Any,
        lr: float,
        weight_decay: float,
        decays: list[int],
        ramp: Callable[[int], float],
        logged: dict[str, Any],
    ) -> Schedule:
        """SGD with momentum 0.9 at ``lr`` times its warm-up ``ramp(step)``, tenfold lower after each step in
        ``decays``: both references' full-scale schedule, which differ in rate, decay, drops and warm-up only."""
        import torch

        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)

        def lr_at(step: int) -> float:
            return lr * ramp(step) * 0.1 ** sum(step >= d for d in decays)

        hyper = {
            C.OPT_NAME: "sgd",
            C.OPT_BASE_LR: lr,
            C.OPT_WEIGHT_DECAY: weight_decay,
            C.OPT_LR_DECAY_STEPS: decays,
            C.OPT_LR_DECAY_FACTOR: 0.1,
        }
        return Schedule(opt, lr_at, hyper | logged)

    def _tiny_schedule(self, model: Any, lr: float, warmup: int) -> Schedule:
        """Adam with a linear warm-up: a small backbone from scratch learns in a few epochs with it (the tiny
        scale); the full scales train with their reference's SGD."""
        import torch

        return Schedule(
            torch.optim.Adam(model.parameters(), lr=lr),
            lambda step: lr * min(1.0, (step + 1) / warmup),
            {"opt_name": "adam", "opt_base_learning_rate": lr, "opt_learning_rate_warmup_steps": warmup},
        )


class Ssd(_Coco):
    name = "ssd"
    metric = "map"
    target = 0.212
    #: the reference's last evaluation (240,000 steps of 32) falls in epoch 66 of COCO 2017's 117,266 training
    #: images with objects; it trains no further usefully
    max_epochs = 66
    mlperf_benchmark = "ssd"
    source = (
        "SSD300 on MLPerf's ResNet-34 backbone, SGD momentum 0.9, weight decay 5e-4, 1e-3 at the reference's 32 "
        "images a step (scaled linearly with a larger global batch, then warmed up over 300 steps: accelbench's "
        "choice, the reference ran at 32 without), tenfold drops after 160k and 200k steps of 32, evaluated after "
        "the epochs holding steps 120k, 160k, 180k, 200k, 220k and 240k of 32 (a small backbone, Adam and an "
        f"evaluation every epoch at --scale tiny), horizontal flips; COCOeval box AP; target 0.212: {MLPERF_V05}"
    )
    size: ClassVar[dict[str, int | None]] = {"full": 300, "tiny": 64}
    lr: ClassVar[dict[str, float]] = {"full": 1e-3, "tiny": 1e-3}
    warmup_steps: ClassVar[int] = 300
    #: the v0.5 reference's rate drops and evaluations, in its steps of 32 images (train.py's iteration counts)
    reference_batch: ClassVar[int] = 32
    decay_at: ClassVar[tuple[int, ...]] = (160_000, 200_000)
    evaluate_at: ClassVar[tuple[int, ...]] = (120_000, 160_000, 180_000, 200_000, 220_000, 240_000)
    _eval_epochs: frozenset[int] = frozenset()

    def evaluates_at(self, epoch: int) -> bool:
        """After every epoch at --scale tiny; at full scale after each epoch in which the reference evaluated
        (it evaluates mid-epoch, at step counts; here an evaluation closes an epoch), set by :meth:`schedule`
        from the images an epoch holds."""
        return self._scale == "tiny" or epoch in self._eval_epochs

    def build(self, data: Any, scale: str) -> "torch.nn.Module":
        classes = len(data[0].label_of) + 1  # and the background
        if scale == "full":
            return ssd300_resnet34(classes)
        return small_ssd(classes, self.size[scale] or 64)

    def schedule(self, model: Any, global_batch: int, steps_per_epoch: int, epochs: int) -> Schedule:
        import math

        if self._scale == "tiny":
            return self._tiny_schedule(model, self.lr["tiny"], max(1, min(self.warmup_steps, steps_per_epoch)))
        images = [step * self.reference_batch for step in self.evaluate_at]
        self._eval_epochs = frozenset(math.ceil(i / (steps_per_epoch * global_batch)) for i in images)
        scale = global_batch / self.reference_batch
        lr = self.lr["full"] * max(1.0, scale)  # the linear scaling rule above the reference's batch
        warmup = self.warmup_steps if scale > 1 else 0
        decays = [round(step * self.reference_batch / global_batch) for step in self.decay_at]
        ramp = (lambda step: min(1.0, (step + 1) / warmup)) if warmup else (lambda step: 1.0)
        return self._stepped_sgd(model, lr, 5e-4, decays, ramp, {C.OPT_LR_WARMUP_STEPS: warmup})


class MaskRcnn(_Coco):
    name = "maskrcnn"
    metric = "box_map"
    target = 0.377
    more_targets = {"mask_map": 0.339}
    mlperf_keys = {"box_map": "BBOX", "mask_map": "SEGM"}
    max_epochs = 20
    batch_size = {"cpu": 16, "gpu": 4}
    mlperf_benchmark = "maskrcnn"
    masks = True
    source = (
        "torchvision Mask R-CNN (ResNet-50 FPN, images resized inside to 800-1333 pixels), SGD momentum 0.9 at "
        "0.02 per 16 images with warm-up and tenfold drops after 60k and 80k steps of 16 (a small backbone and Adam at "
        f"--scale tiny), horizontal flips; COCOeval box and mask AP; targets 0.377 and 0.339: {MLPERF_V05}"
    )
    size: ClassVar[dict[str, int | None]] = {"full": None, "tiny": 64}
    warmup_steps: ClassVar[int] = 500
    #: images seen before each tenfold drop of the learning rate (60,000 and 80,000 steps of 16)
    decay_images: ClassVar[tuple[int, ...]] = (60_000 * 16, 80_000 * 16)

    def build(self, data: Any, scale: str) -> "torch.nn.Module":
        from torchvision.models.detection import maskrcnn_resnet50_fpn

        classes = len(data[0].label_of) + 1  # and the background
        if scale == "full":
            model: torch.nn.Module = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=classes)
            return model
        return small_maskrcnn(classes, self.size[scale] or 64)

    def schedule(self, model: Any, global_batch: int, steps_per_epoch: int, epochs: int) -> Schedule:
        if self._scale == "tiny":
            return self._tiny_schedule(model, 1e-3, max(1, min(300, steps_per_epoch)))
        lr = 0.02 * global_batch / 16  # the linear scaling rule from Detectron's 0.02 at 16 images
        warmup = max(1, min(self.warmup_steps, steps_per_epoch))
        # Detectron's 1x schedule: tenfold drops after 60,000 and 80,000 steps of 16 images, whatever the cap
        decays = [round(images / global_batch) for images in self.decay_images]
        return self._stepped_sgd(
            model,
            lr,
            1e-4,
            decays,
            lambda step: 1 / 3 + (2 / 3) * min(1.0, step / warmup),  # Detectron's warm-up from a third of the rate
            {C.OPT_LR_WARMUP_STEPS: warmup, C.OPT_LR_WARMUP_FACTOR: 1 / 3},
        )

    def combine(self, parts: list[Any]) -> dict[str, float]:
        """Box AP from the boxes and mask AP from the masks (COCOeval reads each result's area from its mask)."""
        results = [r for p in parts for r in p]
        masks = [{k: v for k, v in r.items() if k != "bbox"} for r in results]
        return {"box_map": coco_eval(self._val, results, "bbox"), "mask_map": coco_eval(self._val, masks, "segm")}
