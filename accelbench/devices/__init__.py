"""Where a benchmark runs: device names, synchronisation and precision support.

Every workload takes a ``torch.device`` from here; CUDA specifics live in
:mod:`accelbench.devices.cuda` so that the rest of the code is device-generic.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accelbench.errors import UsageError

if TYPE_CHECKING:
    import torch

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda|mps|xpu)(:\d+)?$")


def check_device_name(name: str) -> str:
    """Validate the spelling of a device before torch is imported (for fast CLI errors)."""
    if not _DEVICE_RE.match(name) or (name.startswith("auto") and ":" in name):
        raise UsageError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N (also mps, xpu)")
    return name


def resolve_device(name: str = "auto") -> "torch.device":
    """Turn a user's device name into a torch.device that exists on this machine."""
    import torch

    check_device_name(name)
    if name == "auto":  # resolved as "cuda" is: with its index (torch.cuda.set_device refuses a bare "cuda")
        return resolve_device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"device {name!r} requested but CUDA is not available here; use --device cpu")
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise UsageError(
                f"device {name!r} does not exist: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
        return torch.device("cuda", index)
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError(f"device {name!r} requested but MPS is not available here; use --device cpu")
    if dev.type == "xpu" and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        raise UsageError(f"device {name!r} requested but XPU is not available here; use --device cpu")
    return dev


def synchronize(device: "torch.device") -> None:
    """Wait for the device's queued work; a no-op on the CPU, which runs synchronously."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
    elif device.type == "xpu":
        torch.xpu.synchronize(device)


def device_label(device: "torch.device") -> str:
    """A human name: the GPU's marketing name, or the CPU model."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        from accelbench.system.cpu import cpu_model

        return cpu_model()
    return str(device)
