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
