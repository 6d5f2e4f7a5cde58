"""Does ``accelbench train --data real`` lose anything to the DataLoader + training loop a user would write?

In alternating rounds on the same host: ``accelbench train MODEL --data real`` (its own process, as the suite
runs it) and a bare loop in this process over the same model, batch, optimizer (SGD, momentum 0.9),
ImageFolder, augmentation (RandomResizedCrop, RandomHorizontalFlip, Normalize), DataLoader workers and
threads, timed from outside over the same number of steps. Prints each side's median images/s, the median
of the per-round ratios (the goal, issue 17: >= 0.97) and accelbench's input-bound share.

    python bench/train_data.py [--data-dir DIR] [--model resnet18] [--scale tiny] [--batch 16] [--workers 1]
        [--steps 30] [--rounds 3]

Without --data-dir it writes 240 random 320x240 JPEGs in 4 class folders to a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def make_folders(root: Path, classes: int = 4, per_class: int = 60) -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in range(classes):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 255, (240, 320, 3), dtype=np.uint8)).save(root / f"c{c}" / f"{i}.jpg")
    return root


def accelbench_rate(args: argparse.Namespace, tmp: Path) -> tuple[float, float]:
    cmd = [sys.executable, "-m", "accelbench", "train", args.model, "--scale", args.scale, "--data", "real"]
    cmd += ["--data-dir", str(args.data_dir), "--workers", str(args.workers), "--batch-size", str(args.batch)]
    cmd += ["--num-batches", str(args.steps), "--display-every", str(args.steps // 5), "--warmup", "3"]
    cmd += ["--threads", str(torch.get_num_threads()), "--json", "--db", str(tmp / "b.db"), "--out", str(tmp / "r")]
    cmd += ["--device", "cpu"]  # the bare loop runs on the CPU, also on a host with a GPU
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"accelbench failed: {out.stderr.strip().splitlines()[-1:]}")
    [r] = json.loads(out.stdout)["results"]
    return r["metrics"]["throughput"]["value"], r["metrics"]["input_wait_share"]["value"]


def bare_rate(args: argparse.Namespace) -> float:
    """The loop a user writes: ImageFolder, the same augmentation, a DataLoader, SGD; timed over the same steps."""
    from torchvision import datasets, transforms

    from accelbench.datasets.images import MEAN, STD
    from accelbench.workloads import workload_class

    workload = workload_class(args.model)()
    size, classes = workload.size(args.scale), workload.classes(args.scale)
    model = workload.build(args.scale).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    augment = transforms.Compose(
        [
            transforms.RandomResizedCrop(size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(MEAN, STD),
        ]
    )
    data = datasets.ImageFolder(str(args.data_dir), augment, target_transform=lambda y: y % classes)
    loader = torch.utils.data.DataLoader(
        data,
        batch_size=args.batch,
        shuffle=True,
        num_workers=args.workers,
        drop_last=True,
        persistent_workers=args.workers > 0,
        prefetch_factor=2 if args.workers > 0 else None,
    )

    def batches():  # epochs back to back, as the loader is used in training
        while True:
            yield from loader

    it = batches()

    def step() -> None:
        images, labels = next(it)
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        optimizer.step()

    for _ in range(3):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    return args.steps * args.batch / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.data_dir is None:
            args.data_dir = make_folders(Path(tmp) / "images")
        print(
            f"{args.model} ({args.scale}), batch {args.batch}, {args.workers} worker(s), {args.steps} steps, "
            f"{torch.get_num_threads()} threads, {args.rounds} rounds; {args.data_dir}"
        )
        ours, bare, ratios, shares = [], [], [], []
        for _ in range(args.rounds):
            a, share = accelbench_rate(args, Path(tmp))
            b = bare_rate(args)
            ours.append(a)
            bare.append(b)
            ratios.append(a / b)
            shares.append(share)
        print(f"{'accelbench --data real':<26} {statistics.median(ours):>10.2f} images/s")
        print(f"{'bare DataLoader loop':<26} {statistics.median(bare):>10.2f} images/s")
        print(f"{'ratio (median of rounds)':<26} {statistics.median(ratios):>10.2f}x  (goal >= 0.97)")
        print(f"{'input-bound share':<26} {statistics.median(shares):>10.1f}% of each step (accelbench's)")


if __name__ == "__main__":
    main()
