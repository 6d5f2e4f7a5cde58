"""What ``train --data-dir`` reads: the format a folder holds, and a Dataset per format with the model's standard
training augmentation. The formats are ``tta``'s (:mod:`accelbench.datasets.training`): image class folders,
CIFAR-10 and MNIST (staged in memory), MovieLens for NCF (four random negatives per positive, as MLPerf trains
it). Datasets are module-level classes so that DataLoader workers can pickle them under any start method."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.datasets.images import IMAGE_SUFFIXES, MEAN, STD
from accelbench.errors import UsageError

if TYPE_CHECKING:
    import torch

IMAGE_LAYOUTS = (
    "image class folders (ImageFolder, directly or under train/), the CIFAR-10 python batches "
    "(cifar-10-batches-py) or the MNIST IDX files"
)
RATINGS_LAYOUT = "ratings.csv with the header userId,movieId,rating,timestamp (MovieLens ml-20m)"
#: negatives sampled per positive interaction (MLPerf NCF's training setting)
NEGATIVES = 4

#: the layout of image class folders, said whenever --data-dir does not have it
LAYOUT = "one sub-folder per class of JPEG/PNG images (ImageFolder), directly or under train/"


def image_root(data_dir: str) -> Path:
    """The folder whose sub-folders are classes: ``DIR/train`` when present, else ``DIR``."""
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise UsageError(f"--data-dir {data_dir} does not exist; it should hold {LAYOUT}")
    if (root / "train").is_dir():
        root = root / "train"
    classes = [p for p in sorted(root.iterdir()) if p.is_dir()]
    if not classes:
        raise UsageError(f"--data-dir {data_dir} has no class folders: expected {LAYOUT}")
    if not any(f.suffix.lower() in IMAGE_SUFFIXES for c in classes for f in c.iterdir()):
        raise UsageError(f"--data-dir {data_dir}: its class folders hold no JPEG/PNG images; expected {LAYOUT}")
    return root


def data_format(model: str, domain: str, data_dir: str) -> str:
    """``imagefolder``, ``cifar10``, ``mnist`` or ``movielens``; a usage error naming the layouts expected."""
    from accelbench.datasets import training as formats

    root = Path(data_dir).expanduser()
    if model == "ncf":
        formats.check_movielens(root)
        return "movielens"
    if domain != "image classification":
        raise UsageError(
            f"--data real reads {IMAGE_LAYOUTS} for image models and {RATINGS_LAYOUT} for ncf; {model} "
            "is measured on synthetic data"
        )
    if not root.is_dir():
        raise UsageError(f"--data-dir {data_dir} does not exist; it should hold {IMAGE_LAYOUTS}")
    if (root / "cifar-10-batches-py").is_dir() or (root / "data_batch_1").is_file():
        formats.check_cifar10(root)
        return "cifar10"
    if any(root.glob("train-images*idx3*")):
        formats.check_mnist(root)
        return "mnist"
    image_root(data_dir)
    return "imagefolder"


class TensorImages:
    """Images staged in memory (N x C x H x W floats in [0, 1]), augmented per sample as ImageFolder's are."""

    def __init__(self, x: "torch.Tensor", y: "torch.Tensor", size: int, classes: int) -> None:
        from torchvision import transforms

        self.x, self.y, self.classes = x, y, classes
        self.augment = transforms.Compose(
            [
                transforms.RandomResizedCrop(size, antialias=True),
                transforms.RandomHorizontalFlip(),
                transforms.Normalize(MEAN, STD),
            ]
        )

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def __getitem__(self, i: int) -> tuple["torch.Tensor", int]:
        image = self.x[i]
        if image.shape[0] == 1:  # MNIST's one channel, as the three an ImageNet model takes
            image = image.expand(3, -1, -1)
        return self.augment(image), int(self.y[i]) % self.classes


class Interactions:
    """MovieLens positives, each followed by NEGATIVES random items labelled 0 (ids folded into the model's)."""

    def __init__(self, users: Any, items: Any, n_users: int, n_items: int, model_users: int, model_items: int) -> None:
        self.users, self.items = users, items
        self.n_items = n_items
        self.model_users, self.model_items = model_users, model_items

    def __len__(self) -> int:
        return len(self.users) * (1 + NEGATIVES)

    def __getitem__(self, i: int) -> tuple[int, int, float]:
        import torch

        k, j = divmod(i, 1 + NEGATIVES)
        user = int(self.users[k])
        item = int(self.items[k]) if j == 0 else int(torch.randint(self.n_items, ()).item())
        return user % self.model_users, item % self.model_items, 1.0 if j == 0 else 0.0


def dataset(fmt: str, data_dir: str, workload: Any, scale: str) -> tuple[TensorImages | Interactions, dict[str, Any]]:
    """The Dataset of ``fmt`` for ``workload``, and what the record should say about it."""
    from accelbench.datasets import training as formats

    root = Path(data_dir).expanduser()
    if fmt == "movielens":
        ratings = formats.movielens(root)
        cfg = workload.cfg(scale)
        interactions = Interactions(
            ratings.train_users, ratings.train_items, ratings.users, ratings.items, cfg.users, cfg.items
        )
        setup = {
            "format": "MovieLens ratings.csv",
            "samples": len(interactions),
            "users": ratings.users,
            "items": ratings.items,
            "decode": "none (ratings staged in memory)",
            "augmentation": f"{NEGATIVES} random negative items per positive (MLPerf NCF)",
        }
        if ratings.users > cfg.users or ratings.items > cfg.items:
            setup["ids"] = f"folded modulo the model's {cfg.users} users and {cfg.items} items"
        return interactions, setup
    size, classes = workload.size(scale), workload.classes(scale)
    train, _ = formats.cifar10(root) if fmt == "cifar10" else formats.mnist(root)
    images = TensorImages(train.x, train.y, size, classes)
    setup = {
        "format": "CIFAR-10 python batches" if fmt == "cifar10" else "MNIST IDX",
        "images": len(images),
        "decode": "none (raw pixels staged in memory)",
        "augmentation": f"RandomResizedCrop({size}), RandomHorizontalFlip, Normalize(ImageNet mean/std)",
    }
    return images, setup
