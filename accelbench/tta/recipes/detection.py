"""COCO to a box mAP target with SSD: MLPerf Training v0.5's light-weight object detection task.

Data: a local COCO 2017 folder (:mod:`accelbench.datasets.coco`), read with pycocotools. A step trains
torchvision's SSD on a batch of images resized to its square input (300x300 at full scale, as MLPerf's SSD;
64x64 at ``--scale tiny``, on a small convolutional backbone) with random horizontal flips; the loss is SSD's
(smooth-L1 box regression and hard-negative-mined classification). Each evaluation detects every image of
``val2017`` and scores the detections with pycocotools' COCOeval (AP at IoU 0.50:0.95, the figure MLPerf
reads): each rank detects its share of the images and the detections of every rank are scored together.

The target is MLPerf Training v0.5's, 0.212 mAP. MLPerf's SSD starts from an ImageNet-trained ResNet-34; nothing
is downloaded here, so the full-scale backbone (torchvision's VGG-16 SSD300) starts from random weights, and a
run to the published target takes correspondingly longer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

from accelbench.datasets.coco import CocoSplit, check_coco_training, coco_eval, load_images, read_split, to_results
from accelbench.tta.recipes.base import Recipe, Schedule

if TYPE_CHECKING:
    import torch

MLPERF_V05 = "MLPerf Training v0.5 rules, quality targets"


class Ssd(Recipe):
    name = "ssd"
    metric = "map"
    target = 0.212
    max_epochs = 60
    batch_size = {"cpu": 16, "gpu": 32}
    mlperf_benchmark = "ssd"
    gpu_precision = "amp_bf16"
    needs = (("pycocotools", "tta"),)
    data_hint = "COCO 2017: annotations/instances_train2017.json, instances_val2017.json, train2017/, val2017/"
    source = (
        "torchvision SSD300 (VGG-16), SGD momentum 0.9 with warm-up (a small backbone and Adam at --scale tiny), "
        f"horizontal flips; COCOeval box AP; target 0.212: {MLPERF_V05}"
    )
    #: the square input by scale
    size: ClassVar[dict[str, int]] = {"full": 300, "tiny": 64}
    lr: ClassVar[dict[str, float]] = {"full": 2.5e-3, "tiny": 1e-3}
    warmup_steps: ClassVar[int] = 300
    _scale: str = "full"

    def check_data(self, data_dir: Path) -> None:
        check_coco_training(data_dir)

    def load(self, data_dir: Path | None, scale: str) -> tuple[CocoSplit, CocoSplit]:
        assert data_dir is not None
        self._scale = scale
        train = read_split(data_dir, "train2017")
        val = read_split(data_dir, "val2017", categories=list(train.label_of))
        self._val = val  # what combine scores against
        return train, val

    def build(self, data: Any, scale: str) -> "torch.nn.Module":
        from torchvision.models.detection import ssd300_vgg16

        from accelbench.workloads.detection import small_ssd

        classes = len(data[0].label_of) + 1  # and the background
        if scale == "full":
            return ssd300_vgg16(weights=None, weights_backbone=None, num_classes=classes)
        return small_ssd(classes, self.size[scale])

    def steps_per_epoch(self, train: CocoSplit, global_batch: int) -> int:
        return max(1, len(train) // global_batch)

    def schedule(self, model: Any, global_batch: int, steps_per_epoch: int, epochs: int) -> Schedule:
        import torch

        lr = self.lr[self._scale]
        warmup = max(1, min(self.warmup_steps, steps_per_epoch))
        if self._scale == "tiny":  # Adam: the small backbone from scratch learns in a few epochs with it
            opt: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=lr)
            hyper = {"opt_name": "adam", "opt_base_learning_rate": lr}
        else:
            opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
            hyper = {"opt_name": "sgd", "opt_base_learning_rate": lr, "opt_weight_decay": 5e-4}
        return Schedule(
            opt, lambda step: lr * min(1.0, (step + 1) / warmup), hyper | {"opt_learning_rate_warmup_steps": warmup}
        )

    def batches(self, train, batch, epoch, seed, rank, world, device) -> Iterator[tuple[Any, ...]]:  # type: ignore[no-untyped-def]
        import torch

        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        order = torch.randperm(len(train), generator=g).tolist()
        size = self.size[self._scale]
        for s in range(self.steps_per_epoch(train, batch * world)):
            ids = [train.image_ids[i] for i in order[(s * world + rank) * batch : (s * world + rank + 1) * batch]]
            images, targets = load_images(train, ids, size)
            flips = torch.rand(len(images), generator=g) < 0.5
            for k in flips.nonzero().flatten().tolist():  # a horizontal flip, its boxes mirrored
                images[k] = images[k].flip(-1)
                b = targets[k]["boxes"]
                targets[k]["boxes"] = torch.stack([size - b[:, 2], b[:, 1], size - b[:, 0], b[:, 3]], dim=1)
            images = [im.to(device, non_blocking=True) for im in images]
            targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
            yield images, targets

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        images, targets = batch
        return sum(model(images, targets).values())

    def evaluate_part(self, model, val, device, rank=0, world=1):  # type: ignore[no-untyped-def]
        """This rank's detections of every ``world``-th image, in COCO's results format."""
        import torch

        ids = val.image_ids[rank::world]
        size = self.size[self._scale]
        results: list[dict] = []
        with torch.no_grad():
            for start in range(0, len(ids), 32):
                chunk = ids[start : start + 32]
                images, _ = load_images(val, chunk, size)
                outputs = model([im.to(device) for im in images])
                results += to_results(val, chunk, outputs, size)
        return results

    def combine(self, parts: list[Any]) -> float:
        return coco_eval(self._val, [r for p in parts for r in p])

    def train_samples(self, train: CocoSplit) -> int:
        return len(train)

    def eval_samples(self, val: CocoSplit) -> int:
        return len(val)

    _val: Any = None
