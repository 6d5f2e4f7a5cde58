"""Tiny datasets written in their real on-disk formats: IDX, CIFAR-10 python pickles, ImageFolder, ratings.csv."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
from PIL import Image


def write_idx(path: Path, array: np.ndarray, compress: bool = False) -> Path:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if compress:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def write_mnist(root: Path, n_train: int = 64, n_test: int = 32) -> Path:
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    for prefix, n, gz in (("train", n_train, True), ("t10k", n_test, False)):
        labels = rng.integers(0, 10, n)
        images = np.zeros((n, 28, 28), np.uint8)
        for i, y in enumerate(labels):  # a bright bar whose row says the digit: learnable
            images[i, 2 + 2 * y : 4 + 2 * y, 4:24] = 255
        write_idx(root / f"{prefix}-images-idx3-ubyte", images, compress=gz)
        write_idx(root / f"{prefix}-labels-idx1-ubyte", labels, compress=gz)
    return root


def write_cifar(root: Path, per_batch: int = 16) -> Path:
    rng = np.random.default_rng(0)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {
            b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
            b"labels": rng.integers(0, 10, per_batch).tolist(),
            b"batch_label": name.encode(),
        }
        with (folder / name).open("wb") as f:
            pickle.dump(batch, f)
    return root


def write_imagefolder(root: Path, classes: int = 2, train: int = 6, val: int = 3) -> Path:
    rng = np.random.default_rng(0)
    for split, n in (("train", train), ("val", val)):
        for c in range(classes):
            d = root / split / f"n{c:08d}"
            d.mkdir(parents=True)
            for i in range(n):
                pixels = rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(d / f"{i}.{'JPEG' if i % 2 else 'png'}")
    return root


def write_ratings(root: Path, users: int = 30, items: int = 60, per_user: int = 8) -> Path:
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    lines = ["userId,movieId,rating,timestamp"]
    for u in range(1, users + 1):
        for t, m in enumerate(rng.choice(items, per_user, replace=False)):
            lines.append(f"{u},{m * 7 + 1},{rng.integers(1, 6)}.0,{1000 + t}")
    (root / "ratings.csv").write_text("\n".join(lines) + "\n")
    return root


#: a toy English-German: each word has one translation, and an adjective follows its noun in the target (so the
#: decoder must attend to the right source word, not copy positions)
_EN = "the a red blue green small big old new cat dog house car tree bird sees finds likes has wants near under".split()
_DE = "der ein rot blau gruen klein gross alt neu katze hund haus auto baum vogel sieht findet mag hat will nahe unter"
_ADJECTIVES = set("red blue green small big old new".split())


def translate_toy(words: list[str]) -> list[str]:
    de = dict(zip(_EN, _DE.split(), strict=True))
    out, i = [], 0
    while i < len(words):
        if words[i] in _ADJECTIVES and i + 1 < len(words) and words[i + 1] not in _ADJECTIVES:
            out += [de[words[i + 1]], de[words[i]]]
            i += 2
        else:
            out.append(de[words[i]])
            i += 1
    return out


def write_parallel(root, train: int = 600, test: int = 40, seed: int = 0):
    """WMT-style parallel text: train.en/.de and newstest2014.en/.de, one sentence per line."""
    import random

    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", train), ("newstest2014", test)):
        pairs = []
        for _ in range(n):
            words = [rng.choice(_EN) for _ in range(rng.randint(3, 8))]
            pairs.append((" ".join(words), " ".join(translate_toy(words))))
        (root / f"{split}.en").write_text("\n".join(p[0] for p in pairs) + "\n", encoding="utf-8")
        (root / f"{split}.de").write_text("\n".join(p[1] for p in pairs) + "\n", encoding="utf-8")
    return root


def write_coco_toy(root, train: int = 256, val: int = 32, seed: int = 0, size: int = 64):
    """COCO 2017's layout (annotations/instances_{train,val}2017.json, train2017/, val2017/): grey images with one
    or two solid rectangles whose colour is their category (COCO's sparse ids 1, 3 and 7), a crowd region now
    and then; polygons give Mask R-CNN its masks."""
    import json
    import random

    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    colours = {1: (220, 30, 30), 3: (30, 200, 30), 7: (30, 30, 220)}
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    ann_id = 1
    for split, n in (("train2017", train), ("val2017", val)):
        (root / split).mkdir(exist_ok=True)
        images, anns = [], []
        for i in range(n):
            img = Image.new("RGB", (size, size), (128, 128, 128))
            draw = ImageDraw.Draw(img)
            for _ in range(rng.randint(1, 2)):
                w, h = rng.randint(12, 30), rng.randint(12, 30)
                x, y = rng.randint(0, size - w), rng.randint(0, size - h)
                cat = rng.choice(list(colours))
                draw.rectangle([x, y, x + w - 1, y + h - 1], fill=colours[cat])
                poly = [x, y, x + w, y, x + w, y + h, x, y + h]
                anns.append({"id": ann_id, "image_id": i + 1, "category_id": cat, "bbox": [x, y, w, h],
                             "area": w * h, "iscrowd": 0, "segmentation": [poly]})  # fmt: skip
                ann_id += 1
            name = f"{i + 1:012d}.jpg"
            img.save(root / split / name, quality=95)
            images.append({"id": i + 1, "file_name": name, "width": size, "height": size})
        categories = [{"id": c, "name": f"colour{c}"} for c in colours]
        (root / "annotations" / f"instances_{split}.json").write_text(
            json.dumps({"images": images, "annotations": anns, "categories": categories})
        )
    return root
