"""COCO detection for training and evaluation to a mAP target, read with pycocotools from a local folder in COCO
2017's layout. Sparse category ids map to contiguous labels 1..K (0 the background) and back; crowd regions stay
out of training and in COCOeval, as the references do. Images are decoded a batch at a time and resized to the
model's square input with their boxes, and detections are scaled back before they are scored (docs/tta.md)."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.errors import UsageError

if TYPE_CHECKING:
    import torch

SPLITS = ("train2017", "val2017")


@dataclass
class CocoSplit:
    """One split: pycocotools' index of it, its image ids in a fixed order, and the category mapping."""

    coco: Any
    folder: Path
    image_ids: list[int]
    #: COCO category id -> training label (1..K), and back
    label_of: dict[int, int] = field(default_factory=dict)
    category_of: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.image_ids)


def check_coco_training(data_dir: Path) -> None:
    """A usage error naming what is missing: both annotation files and both image folders."""
    for split in SPLITS:
        ann = data_dir / "annotations" / f"instances_{split}.json"
        if not ann.is_file():
            raise UsageError(f"{data_dir} lacks annotations/{ann.name}: COCO is annotations/instances_<split>.json")
        if not (data_dir / split).is_dir():
            raise UsageError(f"{data_dir} lacks the {split}/ image folder beside annotations/{ann.name}")


def read_split(data_dir: Path, split: str, categories: list[int] | None = None) -> CocoSplit:
    """The split's index (pycocotools ``COCO``, its loading chatter silenced); training keeps the images with
    an object, evaluation every image."""
    from pycocotools.coco import COCO

    path = data_dir / "annotations" / f"instances_{split}.json"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            coco = COCO(str(path))
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not a COCO instances file ({type(exc).__name__}: {exc})") from None
    cats = categories or sorted(coco.getCatIds())
    if not cats:
        raise UsageError(f"{path} lists no categories")
    ids = sorted(coco.getImgIds())
    if split.startswith("train"):
        ids = [i for i in ids if any(not a.get("iscrowd", 0) for a in coco.imgToAnns.get(i, []))]
    if not ids:
        raise UsageError(f"{path} has no image with an object")
    label_of = {c: i + 1 for i, c in enumerate(cats)}
    return CocoSplit(coco, data_dir / split, ids, label_of, {v: k for k, v in label_of.items()})


def load_images(split: CocoSplit, ids: list[int], size: int | None, masks: bool = False) -> tuple[list[Any], list[Any]]:
    """(images, targets) of ``ids``: each image in [0, 1], resized to ``size`` x ``size`` (None: kept at its own
    size, for a model that resizes inside, as Mask R-CNN does), its boxes (x1 y1 x2 y2), labels and, with
    ``masks``, instance masks in that frame; crowd regions and empty boxes left out."""
    import numpy as np
    import torch
    from PIL import Image
    from torchvision.transforms.functional import pil_to_tensor, resize

    images, targets = [], []
    for image_id in ids:
        info = split.coco.imgs[image_id]
        with Image.open(split.folder / info["file_name"]) as img:
            pixels = pil_to_tensor(img.convert("RGB")).float() / 255.0
        height, width = (size, size) if size else (info["height"], info["width"])
        images.append(resize(pixels, [height, width], antialias=True) if size else pixels)
        sx, sy = width / info["width"], height / info["height"]
        anns = [a for a in split.coco.imgToAnns.get(image_id, []) if not a.get("iscrowd", 0) and a["bbox"][2] > 0]
        anns = [a for a in anns if a["bbox"][3] > 0 and a["category_id"] in split.label_of]
        xywh = torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
        boxes = torch.cat([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], dim=1) * torch.tensor([sx, sy, sx, sy])
        target = {"boxes": boxes, "labels": torch.tensor([split.label_of[a["category_id"]] for a in anns])}
        if masks:
            full = [split.coco.annToMask(a) for a in anns]
            m = torch.from_numpy(np.stack(full)) if full else torch.zeros(0, info["height"], info["width"])
            if size:
                m = resize(m[:, None].float(), [height, width], antialias=False)[:, 0].round()
            target["masks"] = m.to(torch.uint8)
        targets.append(target)
    return images, targets


def hflip(image: "torch.Tensor", target: dict[str, Any]) -> tuple["torch.Tensor", dict[str, Any]]:
    """A horizontal flip of an image with its boxes and masks mirrored."""
    import torch

    width = image.shape[-1]
    b = target["boxes"]
    target = target | {"boxes": torch.stack([width - b[:, 2], b[:, 1], width - b[:, 0], b[:, 3]], dim=1)}
    if "masks" in target:
        target["masks"] = target["masks"].flip(-1)
    return image.flip(-1), target


class CocoImages:
    """The images ``ids`` of a split as a map-style dataset, for a DataLoader whose workers decode them in parallel.

    An item is an (image, target) pair as :func:`load_images` gives; its key is a position in ``ids`` or a
    (position, flip) pair, so that one dataset serves every epoch's order and flips (the sampler that says
    them lives in the training process, and the workers that decode can persist from epoch to epoch).
    """

    def __init__(self, split: CocoSplit, ids: list[int], size: int | None, masks: bool = False) -> None:
        self.split, self.ids, self.size, self.masks = split, ids, size, masks

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, key: int | tuple[int, bool]) -> tuple[Any, dict[str, Any]]:
        i, flip = key if isinstance(key, tuple) else (key, False)
        [image], [target] = load_images(self.split, [self.ids[i]], self.size, self.masks)
        return hflip(image, target) if flip else (image, target)


def as_lists(items: list[tuple[Any, Any]]) -> tuple[list[Any], list[Any]]:
    """A DataLoader's collate for detectors: images of different sizes and targets stay lists."""
    return [image for image, _ in items], [target for _, target in items]


def to_results(
    split: CocoSplit, ids: list[int], outputs: list[dict[str, "torch.Tensor"]], size: int | None
) -> list[dict[str, Any]]:
    """torchvision's detections in COCO's results format (original image frame, category ids): what COCOeval
    scores; with masks, each instance's mask at the image's size, run-length encoded by pycocotools. ``size``
    is the square the images were resized to (None: they were not, the detections are in the image's frame)."""
    import numpy as np
    from pycocotools import mask as mask_utils

    results = []
    for image_id, out in zip(ids, outputs, strict=True):
        info = split.coco.imgs[image_id]
        sx, sy = (info["width"] / size, info["height"] / size) if size else (1.0, 1.0)
        boxes = out["boxes"].detach().float().cpu().numpy()
        scores = out["scores"].detach().float().cpu().numpy()
        labels = out["labels"].detach().cpu().numpy()
        found = out.get("masks")
        masks: np.ndarray | None = None
        if found is not None:
            from torchvision.transforms.functional import resize

            found = found.detach().float().cpu()
            if len(found) and tuple(found.shape[-2:]) != (info["height"], info["width"]):  # a resized input's
                found = resize(found, [info["height"], info["width"]], antialias=False)
            masks = (found[:, 0] > 0.5).numpy().astype(np.uint8)
        for k, (x1, y1, x2, y2) in enumerate(boxes):
            if int(labels[k]) not in split.category_of:
                continue
            r: dict[str, Any] = {
                "image_id": image_id,
                "category_id": split.category_of[int(labels[k])],
                "bbox": [float(x1 * sx), float(y1 * sy), float((x2 - x1) * sx), float((y2 - y1) * sy)],
                "score": float(scores[k]),
            }
            if masks is not None:
                rle = mask_utils.encode(np.asfortranarray(masks[k]))
                r["segmentation"] = rle | {"counts": rle["counts"].decode("ascii")}
            results.append(r)
    return results


def coco_eval(split: CocoSplit, results: list[dict[str, Any]], kind: str = "bbox") -> float:
    """COCO AP at IoU 0.50:0.95 (COCOeval's stats[0]) of ``results`` over the split's images; 0.0 without any
    detection (pycocotools cannot load an empty result list)."""
    from pycocotools.cocoeval import COCOeval

    if not results:
        return 0.0
    with contextlib.redirect_stdout(io.StringIO()):
        dt = split.coco.loadRes(results)
        ev = COCOeval(split.coco, dt, kind)
        ev.params.imgIds = split.image_ids
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return max(0.0, float(ev.stats[0]))  # -1 where no ground truth exists
