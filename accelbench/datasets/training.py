"""Training data in its standard on-disk formats, read from ``--data-dir`` (nothing is ever downloaded).

Each loader checks for the files its format defines and, when they are missing
or malformed, raises a usage error that names them. Small sets are staged as
tensors in memory (as MLPerf allows before the clock starts); ImageNet stays on
disk behind torchvision's ``ImageFolder``.
"""

from __future__ import annotations

import gzip
import pickle
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from accelbench.datasets.images import IMAGE_SUFFIXES, MEAN, STD
from accelbench.errors import UsageError

if TYPE_CHECKING:
    import torch


@dataclass
class TensorSplit:
    """Inputs and labels of one split, staged in memory."""

    x: "torch.Tensor"
    y: "torch.Tensor"

    def __len__(self) -> int:
        return int(self.y.shape[0])


def _require_dir(root: Path, what: str) -> Path:
    if not root.is_dir():
        raise UsageError(f"data directory {root} does not exist; it should hold {what}")
    return root


def digits(seed: int = 0) -> tuple[TensorSplit, TensorSplit]:
    """scikit-learn's bundled handwritten digits (1,797 8x8 images): a fixed 80/20 split, pixels scaled to [0, 1]."""
    import torch
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(data.target, dtype=torch.long)
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(y)))
    test = order[: len(y) // 5]
    train = order[len(y) // 5 :]
    return TensorSplit(x[train], y[train]), TensorSplit(x[test], y[test])


# --- MNIST: IDX files -------------------------------------------------------------------------------

MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def read_idx(path: Path) -> np.ndarray:
    """An IDX array (LeCun's format: magic 0x0000 + type 0x08 + ndim, big-endian sizes, then bytes)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise UsageError(f"{path} is not an unsigned-byte IDX file (bad magic number)")
    ndim = data[3]
    shape = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise UsageError(f"{path} is truncated: its header says {shape}, it holds {body.size} bytes")
    return body.reshape(shape)


def _find(root: Path, name: str) -> Path | None:
    for candidate in (root / name, root / f"{name}.gz", root / name.replace("-idx", ".idx")):
        if candidate.is_file():
            return candidate
    return None


def check_mnist(root: Path) -> list[tuple[Path, Path]]:
    """The (images, labels) IDX paths of the train and test splits; a usage error naming what is missing."""
    expected = ", ".join(f for pair in MNIST_FILES.values() for f in pair) + " (optionally .gz)"
    _require_dir(root, expected)
    pairs = []
    for images, labels in MNIST_FILES.values():
        paths = (_find(root, images), _find(root, labels))
        if paths[0] is None or paths[1] is None:
            raise UsageError(f"{root} lacks the MNIST IDX files: expected {expected}")
        pairs.append((paths[0], paths[1]))
    return pairs


def mnist(root: Path) -> tuple[TensorSplit, TensorSplit]:
    import torch

    splits = []
    for images, labels in check_mnist(root):
        x, y = read_idx(images), read_idx(labels)
        if x.ndim != 3 or y.ndim != 1 or x.shape[0] != y.shape[0]:
            raise UsageError(f"{images} and {labels} do not match: {x.shape} images, {y.shape} labels")
        pixels = torch.from_numpy(x.copy()).float().unsqueeze(1) / 255.0
        splits.append(TensorSplit(pixels, torch.from_numpy(y.astype(np.int64))))
    return splits[0], splits[1]


# --- CIFAR-10: the python pickle batches ------------------------------------------------------------

CIFAR_TRAIN = [f"data_batch_{i}" for i in range(1, 6)]
CIFAR_TEST = "test_batch"


def _cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with path.open("rb") as f:
            batch = pickle.load(f, encoding="bytes")
        data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        labels = np.asarray(batch[b"labels"], dtype=np.int64)
    except (pickle.UnpicklingError, KeyError, ValueError, EOFError) as exc:
        raise UsageError(f"{path} is not a CIFAR-10 python batch ({type(exc).__name__}: {exc})") from None
    return data, labels


def check_cifar10(root: Path) -> Path:
    """The folder holding the batches (``root`` or ``root/cifar-10-batches-py``)."""
    expected = ", ".join(CIFAR_TRAIN + [CIFAR_TEST]) + " (the cifar-10-batches-py folder)"
    _require_dir(root, expected)
    if (root / "cifar-10-batches-py").is_dir():
        root = root / "cifar-10-batches-py"
    missing = [n for n in CIFAR_TRAIN + [CIFAR_TEST] if not (root / n).is_file()]
    if missing:
        raise UsageError(f"{root} lacks {', '.join(missing)}: expected {expected}")
    return root


def cifar10(root: Path) -> tuple[TensorSplit, TensorSplit]:
    """``cifar-10-batches-py``: data_batch_1..5 and test_batch (dicts of b'data' uint8 Nx3072 and b'labels')."""
    import torch

    root = check_cifar10(root)
    parts = [_cifar_batch(root / n) for n in CIFAR_TRAIN]
    train_x = np.concatenate([p[0] for p in parts])
    train_y = np.concatenate([p[1] for p in parts])
    test_x, test_y = _cifar_batch(root / CIFAR_TEST)

    def split(x: np.ndarray, y: np.ndarray) -> TensorSplit:
        return TensorSplit(torch.from_numpy(x).float() / 255.0, torch.from_numpy(y))

    return split(train_x, train_y), split(test_x, test_y)


# --- ImageNet: ImageFolder train/ and val/ ----------------------------------------------------------


def check_imagenet(root: Path) -> None:
    expected = "train/ and val/ folders, each with one sub-folder per class of JPEG/PNG images"
    _require_dir(root, expected)
    for split in ("train", "val"):
        folder = root / split
        if not folder.is_dir() or not any(p.is_dir() for p in folder.iterdir()):
            raise UsageError(f"{root} lacks {split}/ class folders: expected {expected}")


def imagenet(root: Path, size: int) -> tuple[Any, Any]:
    """``train/<class>/*.JPEG`` and ``val/<class>/*.JPEG``, the layout torchvision's ImageFolder reads."""
    from torchvision import datasets, transforms

    check_imagenet(root)
    normalize = transforms.Normalize(MEAN, STD)
    train = datasets.ImageFolder(
        str(root / "train"),
        transforms.Compose(
            [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(), transforms.ToTensor(), normalize]
        ),
        is_valid_file=lambda p: p.lower().endswith(IMAGE_SUFFIXES),
    )
    val = datasets.ImageFolder(
        str(root / "val"),
        transforms.Compose(
            [transforms.Resize(size * 256 // 224), transforms.CenterCrop(size), transforms.ToTensor(), normalize]
        ),
        is_valid_file=lambda p: p.lower().endswith(IMAGE_SUFFIXES),
    )
    if train.classes != val.classes:
        raise UsageError(f"{root}/train and {root}/val have different class folders")
    return train, val


# --- MovieLens: ml-20m ratings.csv ------------------------------------------------------------------


@dataclass
class Ratings:
    """Implicit feedback as MLPerf's NCF uses it: every rating is a positive; each user's latest is held out."""

    users: int
    items: int
    train_users: np.ndarray
    train_items: np.ndarray
    test_users: np.ndarray
    test_items: np.ndarray
    #: every (user, item) rated, as the sorted keys user * items + item (vectorised membership tests)
    seen: np.ndarray

    def rated(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        keys = users.astype(np.int64) * self.items + items
        pos = np.searchsorted(self.seen, keys).clip(max=len(self.seen) - 1)
        found: np.ndarray = self.seen[pos] == keys
        return found


def check_movielens(root: Path) -> Path:
    """The ratings.csv path (in ``root`` or ``root/ml-20m``), its header checked."""
    expected = "ratings.csv with the header userId,movieId,rating,timestamp (MovieLens ml-20m)"
    _require_dir(root, expected)
    path = root / "ratings.csv"
    if not path.is_file() and (root / "ml-20m" / "ratings.csv").is_file():
        path = root / "ml-20m" / "ratings.csv"
    if not path.is_file():
        raise UsageError(f"{root} lacks ratings.csv: expected {expected}")
    with path.open(encoding="utf-8") as f:
        header = f.readline().strip().split(",")
    if header[:4] != ["userId", "movieId", "rating", "timestamp"]:
        raise UsageError(f"{path} has the header {','.join(header)}: expected {expected}")
    return path


def movielens(root: Path) -> Ratings:
    path = check_movielens(root)
    table = np.loadtxt(path, delimiter=",", skiprows=1, usecols=(0, 1, 3), dtype=np.int64, ndmin=2)
    if table.size == 0:
        raise UsageError(f"{path} holds no ratings")
    _, users = np.unique(table[:, 0], return_inverse=True)
    _, items = np.unique(table[:, 1], return_inverse=True)
    # each user's latest interaction (ties broken by order in the file) is the test positive: leave-one-out
    order = np.lexsort((np.arange(len(users)), table[:, 2], users))
    users, items = users[order], items[order]
    last = np.r_[users[1:] != users[:-1], True]
    seen = np.unique(users.astype(np.int64) * (int(items.max()) + 1) + items)
    return Ratings(
        users=int(users.max()) + 1,
        items=int(items.max()) + 1,
        train_users=users[~last],
        train_items=items[~last],
        test_users=users[last],
        test_items=items[last],
        seen=seen,
    )
