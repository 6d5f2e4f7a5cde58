"""Real training data for ``accelbench train --data real``: an input pipeline, and how long steps waited for it.

The input pipeline costs each machine a different share of its step, and that share can change a ranking. The
pipeline is the one a user writes (``ImageFolder``, the model's augmentation, a ``DataLoader`` with workers,
pinned memory where the device's kind gains from it, a ``DistributedSampler`` shard per rank); the time a step
waits for its batch is measured on the host and reported per window as the input-bound share (docs/train.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from accelbench.datasets.images import IMAGE_SUFFIXES, MEAN, STD
from accelbench.devices import synchronize
from accelbench.devices.kind import kind_of
from accelbench.errors import UsageError
from accelbench.measure.stats import Measurement
from accelbench.system.cpu import usable_cores
from accelbench.train.datasets import data_format, dataset, image_root
from accelbench.train.decode import DeviceAugment, collate, encoded_folder, resolve

if TYPE_CHECKING:
    import torch
    from torch.utils.data.distributed import DistributedSampler


#: at most this many loader workers by default: more rarely help one device and cost memory
MAX_DEFAULT_WORKERS = 8


def default_workers(world: int = 1) -> int:
    """Loader workers for one rank: the cores this process may use, shared by the node's ranks, less the
    training process's own, at most MAX_DEFAULT_WORKERS."""
    cores = usable_cores()
    return max(0, min(MAX_DEFAULT_WORKERS, cores // max(world, 1) - 1))


@dataclass
class Pipeline:
    """A loader and what it is, for the record; ``feed`` gives the step its next batch and counts the wait."""

    loader: Any
    setup: dict[str, Any]
    waited: float = 0.0
    batches: int = 0
    _it: Iterator[Any] | None = field(default=None, repr=False)
    epoch: int = 0
    #: what turns the loader's batch into tensors on the device, where that is more than a copy (decode there)
    finish: Callable[[Any], Any] | None = None

    def _next(self) -> Any:
        while True:
            if self._it is None:
                set_epoch = getattr(getattr(self.loader, "sampler", None), "set_epoch", None)
                if set_epoch is not None:
                    set_epoch(self.epoch)  # each epoch its own shuffle, the same on every rank
                self._it = iter(self.loader)
            try:
                return next(self._it)
            except StopIteration:
                self._it, self.epoch = None, self.epoch + 1

    def feeder(self, device: "torch.device", convert: Callable[[Any], Any]) -> Callable[[], Any]:
        """The next batch on ``device`` (non-blocking from pinned memory where its kind pins), converted as the
        model wants."""
        non_blocking = kind_of(device).pin_memory

        def feed() -> Any:
            t0 = time.perf_counter()
            raw = self._next()
            batch = self.finish(raw) if self.finish else tuple(t.to(device, non_blocking=non_blocking) for t in raw)
            self.waited += time.perf_counter() - t0
            self.batches += 1
            return convert(batch)

        return feed


class FoldLabels:
    """A class index folded into the model's outputs (a tiny model has 10); a class, so workers can pickle it."""

    def __init__(self, classes: int) -> None:
        self.classes = classes

    def __call__(self, y: int) -> int:
        return y % self.classes


def open_pipeline(
    workload: Any, params: Any, device: "torch.device", batch: int, workers: int, rank: int = 0, world: int = 1
) -> Pipeline:
    """The loader of ``--data-dir`` in whichever format it holds, for ``workload``, and its setup for the record."""
    fmt = data_format(workload.info.name, workload.info.domain, params.data_dir)
    finish = None
    if fmt == "imagefolder":
        size, classes = workload.size(params.scale), workload.classes(params.scale)
        decoder, fallback = resolve(params.decode, device)
        if decoder == "device":
            data, setup, finish = _encoded_folder(params.data_dir, size, classes, device)
        else:
            data, setup = _image_folder(params.data_dir, size, classes)
            if fallback:
                setup["decode_fallback"] = f"--decode auto stayed on the CPU: {fallback}"
    else:
        data, setup = dataset(fmt, params.data_dir, workload, params.scale)
    setup = {"data_dir": str(Path(params.data_dir).expanduser())} | setup
    if len(data) < batch * world:
        raise UsageError(
            f"--data-dir {params.data_dir} holds {len(data)} samples, fewer than one batch of {batch} per device"
            f"{f' on {world} devices' if world > 1 else ''}: lower --batch-size or add data"
        )
    pipeline = _loader(data, setup, batch, workers, device, rank, world, collate if finish else None)
    pipeline.finish = finish
    return pipeline


def _encoded_folder(
    data_dir: str, size: int, classes: int, device: "torch.device"
) -> tuple[Any, dict[str, Any], DeviceAugment]:
    """The files' bytes from the workers, decoded (nvJPEG on NVIDIA) and augmented on ``device`` by the step's
    feeder."""
    data, names = encoded_folder(image_root(data_dir), classes, lambda p: p.lower().endswith(IMAGE_SUFFIXES))
    setup: dict[str, Any] = {
        "format": "image class folders (ImageFolder)",
        "images": len(data),
        "classes": len(names),
        "decode": f"nvJPEG on {device} (torchvision.io.decode_jpeg, one call per batch; the workers read the "
        "files' bytes); other formats by torchvision.io on the CPU",
        "augmentation": f"RandomResizedCrop({size}), RandomHorizontalFlip, Normalize(ImageNet mean/std), "
        f"on {device} after the decode: inside the step's time",
    }
    if len(names) > classes:
        setup["labels"] = f"class index modulo {classes} (the model has {classes} outputs)"
    return data, setup, DeviceAugment(device, size)


def _image_folder(data_dir: str, size: int, classes: int) -> tuple[Any, dict[str, Any]]:
    """ImageFolder with the standard ImageNet training augmentation (PIL decodes each image)."""
    from torchvision import datasets, transforms

    root = image_root(data_dir)
    augment = [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip()]
    data = datasets.ImageFolder(
        str(root),
        transforms.Compose([*augment, transforms.ToTensor(), transforms.Normalize(MEAN, STD)]),
        target_transform=FoldLabels(classes),
        is_valid_file=lambda p: p.lower().endswith(IMAGE_SUFFIXES),
    )
    setup: dict[str, Any] = {
        "format": "image class folders (ImageFolder)",
        "images": len(data),
        "classes": len(data.classes),
        "decode": "PIL (torchvision ImageFolder)",
        "augmentation": f"RandomResizedCrop({size}), RandomHorizontalFlip, ToTensor, Normalize(ImageNet mean/std)",
    }
    if len(data.classes) > classes:
        setup["labels"] = f"class index modulo {classes} (the model has {classes} outputs)"
    return data, setup


def _loader(
    data: Any,
    setup: dict[str, Any],
    batch: int,
    workers: int,
    device: "torch.device",
    rank: int,
    world: int,
    collate_fn: Callable[[Any], Any] | None = None,
) -> Pipeline:
    """A DataLoader as a user sets one up: workers, prefetching, pinned memory where the device's kind pins, a
    shard per rank."""
    import torch

    sampler: DistributedSampler[Any] | None = None
    if world > 1:
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, drop_last=True)
    pin = kind_of(device).pin_memory
    loader = torch.utils.data.DataLoader(
        data,
        batch_size=batch,
        shuffle=sampler is None,
        sampler=sampler,
        num_workers=workers,
        pin_memory=pin,
        drop_last=True,
        persistent_workers=workers > 0,
        prefetch_factor=2 if workers > 0 else None,
        collate_fn=collate_fn,
    )
    setup = setup | {
        "workers": workers,
        "pin_memory": pin,
        "non_blocking_copy": pin,
        "prefetch_factor": 2 if workers > 0 else None,
        "sampler": "DistributedSampler (a shard per rank)" if sampler is not None else "random",
    }
    return Pipeline(loader, setup)


def measure_pipeline(pipeline: Pipeline, device: "torch.device", warmup: int, windows: int, window: int) -> Measurement:
    """The pipeline alone (``--data-only``): seconds per batch delivered to the device, per window of batches.

    The ceiling the input puts on training: a step can take no less than this, whatever the accelerator.
    """
    feed = pipeline.feeder(device, lambda b: b)
    for _ in range(warmup):  # the workers start and fill their prefetch queues
        feed()
    samples = []
    for _ in range(windows):
        t0 = time.perf_counter()
        for _ in range(window):
            feed()
        synchronize(device)
        samples.append((time.perf_counter() - t0) / window)
    return Measurement(tuple(samples), calls_per_sample=window, clock="perf_counter_ns")
