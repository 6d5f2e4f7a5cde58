"""Accuracy-mode datasets in their standard on-disk formats, read from a local directory (nothing is downloaded).

A :class:`Samples` gives LoadGen's query sample library what it needs: how many
samples there are, sample ``i``'s inputs (loaded only when LoadGen asks, so a
large set need not fit in memory), and the labels the quality metric scores
answers against. A directory that does not hold the expected files is a usage
error that names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from accelbench.datasets.images import IMAGE_SUFFIXES, MEAN, STD
from accelbench.errors import UsageError

if TYPE_CHECKING:
    import torch


@dataclass
class Samples:
    load_one: Callable[[int], tuple["torch.Tensor", ...]]
    labels: list[Any]
    source: str

    def __len__(self) -> int:
        return len(self.labels)

    def inputs(self, index: int, device: "torch.device") -> tuple["torch.Tensor", ...]:
        return tuple(t.unsqueeze(0).to(device) for t in self.load_one(index))


def _directory(root: Path, expected: str) -> Path:
    if not root.is_dir():
        raise UsageError(f"dataset directory {root} does not exist; it should hold {expected}")
    return root


def check_image_folder(root: Path) -> tuple[Path, list[str], list[tuple[Path, int]]]:
    """(the folder, its class names, every (image, class index)); a usage error when it holds no images."""
    expected = "one sub-folder per class holding .png/.jpg images (an ImageFolder, or one under val/)"
    root = _directory(root, expected)
    if (root / "val").is_dir():
        root = root / "val"
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    files = [
        (f, c)
        for c, name in enumerate(classes)
        for f in sorted((root / name).iterdir())
        if f.suffix.lower() in IMAGE_SUFFIXES
    ]
    if not files:
        raise UsageError(f"no images in {root}: expected {expected}")
    return root, classes, files


def image_folder(root: Path, size: int) -> Samples:
    """ImageFolder layout (``root/<class>/<image>``, or the same under ``root/val``): resize, centre crop, normalise.

    Class indices are the sorted folder names, as torchvision's ImageFolder (and
    ImageNet's synset order) number them.
    """
    from PIL import Image
    from torchvision import transforms

    root, classes, files = check_image_folder(root)
    prep = transforms.Compose(
        [
            transforms.Resize(size * 256 // 224),
            transforms.CenterCrop(size),
            transforms.ToTensor(),
            transforms.Normalize(MEAN, STD),
        ]
    )

    def load(i: int) -> tuple["torch.Tensor", ...]:
        with Image.open(files[i][0]) as img:
            return (prep(img.convert("RGB")),)

    return Samples(load, [c for _, c in files], f"ImageFolder {root} ({len(files)} images, {len(classes)} classes)")


def check_npy_cases(root: Path) -> list[Path]:
    """The volume files, each checked to have its label file."""
    expected = "case_*_x.npy volumes (channels, depth, height, width) with matching case_*_y.npy labels"
    root = _directory(root, expected)
    volumes = sorted(root.glob("*_x.npy"))
    if not volumes:
        raise UsageError(f"no *_x.npy volumes in {root}: expected {expected}")
    missing = [v.name for v in volumes if not v.with_name(v.name[: -len("_x.npy")] + "_y.npy").is_file()]
    if missing:
        raise UsageError(f"{root} lacks the labels of {', '.join(missing[:3])}: expected {expected}")
    return volumes


def npy_cases(root: Path) -> Samples:
    """KiTS19 as the MLPerf 3D U-Net reference preprocesses it: ``case_NNNNN_x.npy`` (C, D, H, W) and ``_y.npy``."""
    import numpy as np
    import torch

    volumes = check_npy_cases(root)

    def load(i: int) -> tuple["torch.Tensor", ...]:
        return (torch.from_numpy(np.load(volumes[i]).astype(np.float32)),)

    labels: list[Any] = [_LazyLabel(v.with_name(v.name[: -len("_x.npy")] + "_y.npy")) for v in volumes]
    return Samples(load, labels, f"{len(volumes)} KiTS19 cases in {root}")


class _LazyLabel:
    """A label volume read only when scored (a whole label set may not fit in memory)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        return np.load(self.path).astype(dtype or np.int64)


#: Criteo day files hold ~180M lines; accuracy mode reads at most this many (in file order)
CRITEO_MAX_SAMPLES = 1_000_000
CRITEO_EXPECTED = "Criteo click logs: day_* (Terabyte) or train.txt/test.txt (Kaggle) or *.tsv, tab-separated"


def check_criteo(root: Path) -> list[Path]:
    root = _directory(root, CRITEO_EXPECTED)
    files = sorted(
        p for p in root.iterdir() if p.is_file() and (p.name.startswith("day_") or p.suffix in (".tsv", ".txt"))
    )
    if not files:
        raise UsageError(f"no Criteo files in {root}: expected {CRITEO_EXPECTED}")
    return files


def criteo(root: Path, tables: int, rows: int) -> Samples:
    """Label, 13 integer and 26 hex categorical columns per line, as DLRM's reference preprocesses them:
    dense -> log(1 + max(x, 0)), categorical -> hex value modulo the table's rows (empty fields are 0)."""
    import numpy as np
    import torch

    labels, dense, sparse = [], [], []
    for path in check_criteo(root):
        with path.open(encoding="utf-8") as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                if len(cols) != 40:
                    raise UsageError(f"{path}: a line has {len(cols)} tab-separated columns; Criteo has 40")
                labels.append(int(cols[0] or 0))
                dense.append([max(int(c), 0) if c else 0 for c in cols[1:14]])
                sparse.append([int(c, 16) % rows if c else 0 for c in cols[14 : 14 + tables]])
                if len(labels) >= CRITEO_MAX_SAMPLES:
                    break
        if len(labels) >= CRITEO_MAX_SAMPLES:
            break
    x = torch.from_numpy(np.log1p(np.asarray(dense, dtype=np.float32)))
    idx = torch.from_numpy(np.asarray(sparse, dtype=np.int64))
    return Samples(lambda i: (x[i], idx[i]), labels, f"{len(labels)} Criteo lines in {root}")


COCO_EXPECTED = "annotations/instances_<split>.json (COCO format) and the <split>/ folder of its images"


def check_coco(root: Path) -> tuple[Path, Path]:
    """(annotation file, image folder): the first ``annotations/instances_*.json`` with its image folder."""
    root = _directory(root, COCO_EXPECTED)
    for ann in sorted((root / "annotations").glob("instances_*.json")) if (root / "annotations").is_dir() else []:
        images = root / ann.stem.removeprefix("instances_")
        if images.is_dir():
            return ann, images
    raise UsageError(f"{root} lacks a COCO split: expected {COCO_EXPECTED}")


def coco(root: Path, size: int) -> Samples:
    """COCO detection: each image resized to ``size`` x ``size`` (SSD's input), its boxes scaled alike.

    Labels are (G, 5) rows x1 y1 x2 y2 category_id in the resized frame; crowd boxes are left out.
    """
    import json

    import numpy as np
    from PIL import Image
    from torchvision.transforms.functional import pil_to_tensor, resize

    ann_path, folder = check_coco(root)
    try:
        data = json.loads(ann_path.read_text(encoding="utf-8"))
        images = sorted(data["images"], key=lambda im: im["id"])
        boxes: dict[int, list[list[float]]] = {im["id"]: [] for im in images}
        for a in data["annotations"]:
            if not a.get("iscrowd", 0) and a["image_id"] in boxes:
                x, y, w, h = a["bbox"]
                boxes[a["image_id"]].append([x, y, x + w, y + h, a["category_id"]])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{ann_path} is not a COCO instances file ({type(exc).__name__}: {exc})") from None
    labels = []
    for im in images:
        g = np.asarray(boxes[im["id"]], dtype=np.float32).reshape(-1, 5)
        g[:, [0, 2]] *= size / im["width"]
        g[:, [1, 3]] *= size / im["height"]
        labels.append(g)

    def load(i: int) -> tuple["torch.Tensor", ...]:
        with Image.open(folder / images[i]["file_name"]) as img:
            pixels = pil_to_tensor(img.convert("RGB")).float() / 255.0
        return (resize(pixels, [size, size], antialias=True),)

    return Samples(load, labels, f"COCO {folder.name}: {len(images)} images")
