"""A classifier whose weights are set by hand, and the ImageFolder it classifies perfectly (accuracy-mode tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from accelbench.infer.backends import TorchEager
from accelbench.workloads.base import ModelInfo, Workload

#: folder names sort in class order (ImageFolder numbers classes by sorted name): red 0, green 1, blue 2
COLOURS = {"0-red": (230, 20, 20), "1-green": (20, 230, 20), "2-blue": (20, 20, 230)}


class ColourNet(Workload):
    """Mean colour -> class: after ImageNet normalisation the dominant channel is the largest, so identity weights
    classify solid red, green and blue images perfectly; permuted weights get every one wrong."""

    info = ModelInfo("colour-net", "image classification", "images", "(batch, 3, 32, 32)", default_batch={"cpu": 8})

    def build(self, scale):
        model = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 3))
        with torch.no_grad():
            model[2].weight.copy_(torch.eye(3) * 4)
            model[2].bias.zero_()
        return model

    def synthetic_batch(self, batch_size, device, scale):
        return torch.randn(batch_size, 3, 32, 32, device=device), torch.randint(0, 3, (batch_size,), device=device)

    def loss(self, model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y)


def write_colour_folder(root: Path, per_class: int = 8) -> Path:
    """An ImageFolder of noisy solid-colour PNG and JPEG images."""
    rng = np.random.default_rng(0)
    for name, rgb in COLOURS.items():
        folder = root / name
        folder.mkdir(parents=True)
        for i in range(per_class):
            pixels = np.clip(np.array(rgb) + rng.normal(0, 20, (40, 40, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}.{'png' if i % 2 else 'jpg'}")
    return root


def checkpoint(path: Path, permute: bool = False) -> Path:
    """ColourNet's state_dict, optionally with the class rows permuted (a deliberately broken model)."""
    model = ColourNet().build("full")
    state = model.state_dict()
    if permute:
        state["2.weight"] = state["2.weight"][[1, 2, 0]]
    torch.save(state, path)
    return path


class ShiftedClasses(TorchEager):
    """A deliberately broken backend: PyTorch eager with the last linear layer's rows rolled by one class."""

    name, summary = "shifted", "eager PyTorch answering the next class"

    def prepare_model(self, model):
        last = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
        with torch.no_grad():
            last.weight.copy_(last.weight.roll(1, dims=0))
            last.bias.copy_(last.bias.roll(1, dims=0))
        return model


class FourBitWeights(TorchEager):
    """A deliberately broken precision: PyTorch eager whose convolution and linear weights are truncated to 4 bits
    (16 levels per tensor) before the precision it claims (bf16, int8 ...) is applied."""

    name, summary = "four-bit", "eager PyTorch with weights truncated to 4 bits"
    precisions = (*TorchEager.precisions, "int8")

    def load(self, served, model, device, precision, calibration, channels_last=False, compile_mode="default"):
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                    scale = m.weight.abs().amax() / 7
                    m.weight.copy_((m.weight / scale).trunc().clamp(-8, 7) * scale)
        served_precision = "fp32" if precision == "int8" else precision
        return super().load(served, model, device, served_precision, calibration, channels_last, compile_mode)


class DigitsNet(Workload):
    """A small convolutional network with BatchNorm for the handwritten digits scikit-learn ships (8x8 scans, 10
    classes), read at 16x16 as the ImageFolder loader prepares them: trained here in seconds to a real accuracy."""

    info = ModelInfo("digits-net", "image classification", "images", "(batch, 3, 16, 16)", default_batch={"cpu": 16})

    def build(self, scale):
        def block(cin, cout):
            return [torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]

        return torch.nn.Sequential(
            *block(3, 16), torch.nn.MaxPool2d(2), *block(16, 32), torch.nn.MaxPool2d(2), *block(32, 64),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10),
        )  # fmt: skip

    def synthetic_batch(self, batch_size, device, scale):
        return torch.randn(batch_size, 3, 16, 16, device=device), torch.randint(0, 10, (batch_size,), device=device)

    def loss(self, model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y)


def write_digits(root: Path, held_out: int = 300) -> tuple[Path, Path]:
    """scikit-learn's digits as two ImageFolders of 8x8 grey PNGs: ``train`` and the last ``held_out`` as ``val``."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    n = len(digits.target)
    for i, (image, label) in enumerate(zip(digits.images, digits.target, strict=True)):
        folder = root / ("val" if i >= n - held_out else "train") / f"{label}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((image * 255 / 16).astype(np.uint8), mode="L").save(folder / f"{i}.png")
    return root / "train", root / "val"


def train_digits(train: Path, path: Path, epochs: int = 6) -> Path:
    """DigitsNet trained on ``train`` (read by accelbench's own ImageFolder loader); its state_dict at ``path``."""
    from accelbench.datasets.accuracy import image_folder

    samples = image_folder(train, size=16)
    x = torch.cat([samples.inputs(i, torch.device("cpu"))[0] for i in range(len(samples))])
    y = torch.tensor(samples.labels)
    torch.manual_seed(0)
    model = DigitsNet().build("full")
    steps = epochs * -(-len(y) // 32)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=steps)  # settles, then stops
    for _ in range(epochs):
        for idx in torch.randperm(len(y)).split(32):
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
            schedule.step()
    torch.save(model.eval().state_dict(), path)
    return path
