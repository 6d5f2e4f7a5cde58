"""Which numeric precisions a device can run, and how to switch torch into each.

Precisions the device cannot run produce a ``skipped`` record with the reason
from :func:`unsupported_reason` instead of a crash or a silently wrong number.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

from accelbench.errors import UsageError

if TYPE_CHECKING:
    import torch

#: Precisions a matmul-like kernel can be asked for (later issues extend this).
MATMUL_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def check_precision(name: str, allowed: tuple[str, ...] = MATMUL_PRECISIONS) -> str:
    if name not in allowed:
        raise UsageError(f"unknown precision {name!r}: choose one of {', '.join(allowed)}")
    return name


def torch_dtype(precision: str) -> "torch.dtype":
    """The storage dtype of the operands; tf32 stores fp32 and computes on Tensor Cores."""
    import torch

    return {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
    }[precision]


def unsupported_reason(device: "torch.device", precision: str) -> str | None:
    """Why ``device`` cannot run ``precision``, or None when it can."""
    import torch

    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        name = torch.cuda.get_device_name(device)
        if precision == "tf32" and major < 8:
            return f"tf32 needs compute capability 8.0+ (Ampere); {name} is {major}.{minor}"
        if precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
            return f"bf16 needs compute capability 8.0+ (Ampere); {name} is {major}.{minor}"
        return None
    if precision == "tf32":
        return f"tf32 is an NVIDIA Tensor Core mode; the {device.type} device has no tf32"
    return None


@contextlib.contextmanager
def matmul_mode(device: "torch.device", precision: str) -> Iterator[None]:
    """Allow tf32 only when it is asked for, and restore torch's global flags afterwards."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    tf32 = precision == "tf32"
    try:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
