"""Where a benchmark runs: device names, and the seam every kind of accelerator answers through.

Every workload takes a ``torch.device`` from here. What differs between kinds (CUDA, ROCm, XPU, MPS, the
host) lives in one module per kind behind :class:`accelbench.devices.kind.DeviceKind`; the rest of the code
asks ``kind_of(device)`` and never tests a device's type.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accelbench.devices.kind import by_name, kind_of, kinds
from accelbench.errors import UsageError

if TYPE_CHECKING:
    import torch

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda|rocm|mps|xpu|xla|[a-z][a-z0-9_]*)(:\d+)?$")


def check_device_name(name: str) -> str:
    """Validate the spelling of a device before torch is imported (for fast CLI errors)."""
    if not _DEVICE_RE.match(name) or (name.startswith("auto") and ":" in name):
        raise UsageError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N (also rocm, xpu, mps, xla)")
    return name


def resolve_device(name: str = "auto") -> "torch.device":
    """Turn a user's device name into a torch.device that exists on this machine (through its kind)."""
    check_device_name(name)
    if name == "auto":  # the first accelerator kind with a device, else the host
        for k in kinds():
            if k.auto():
                return k.resolve(None)
        return kind_of("cpu").resolve(None)
    kind_name, _, index_text = name.partition(":")
    index = int(index_text) if index_text else None
    kind = by_name(kind_name)
    if kind is None:
        names = ", ".join(sorted(k.name for k in kinds()))
        hint = next((f"; {k.aliases[kind_name]}" for k in kinds() if kind_name in k.aliases), "")
        raise UsageError(f"unknown device {name!r}{hint}; the device kinds are {names}")
    rocm = by_name("rocm")
    if kind.name == "cuda" and kind.unavailable() and rocm is not None and not rocm.unavailable():
        kind = rocm  # "cuda" on a HIP build of torch: the AMD GPUs
    why = kind.unavailable()
    if why:
        raise UsageError(f"device {name!r} requested but {why}; use --device cpu")
    if index is not None and index >= kind.count():
        raise UsageError(f"device {name!r} does not exist: this machine has {kind.count()} {kind.name} device(s)")
    return kind.resolve(index)


def synchronize(device: "torch.device") -> None:
    """Wait for the device's queued work; a no-op on the CPU, which runs synchronously."""
    kind_of(device).synchronize(device)


def device_label(device: "torch.device") -> str:
    """A human name: the accelerator's marketing name, or the CPU model."""
    return kind_of(device).label(device)
