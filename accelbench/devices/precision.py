"""Which numeric precisions a device can run, and how to switch torch into each.

Precisions the device cannot run produce a ``skipped`` record with the reason
from :func:`unsupported_reason` instead of a crash or a silently wrong number.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import torch

#: Floating-point precisions every compute kernel accepts.
FLOAT_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
#: Precisions of matrix-multiply kernels: integer and 8-bit float through torch._int_mm / torch._scaled_mm.
MATMUL_PRECISIONS = (*FLOAT_PRECISIONS, "int8", "fp8")
ALL_PRECISIONS = MATMUL_PRECISIONS


def torch_dtype(precision: str) -> "torch.dtype":
    """The storage dtype of the operands; tf32 stores fp32 and computes on Tensor Cores."""
    import torch

    return {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
        "int8": torch.int8,
        "fp8": torch.float8_e4m3fn,
    }[precision]


def unsupported_reason(device: "torch.device", precision: str) -> str | None:
    """Why ``device`` cannot run ``precision`` at all, or None when it can."""
    import torch

    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        name = torch.cuda.get_device_name(device)
        cc = f"{name} is {major}.{minor}"
        if precision == "tf32" and major < 8:
            return f"tf32 needs compute capability 8.0+ (Ampere); {cc}"
        if precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
            return f"bf16 needs compute capability 8.0+ (Ampere); {cc}"
        if precision == "int8" and (major, minor) < (7, 5):
            return f"int8 Tensor Core GEMM (torch._int_mm) needs compute capability 7.5+ (Turing); {cc}"
        if precision == "fp8" and (major, minor) < (8, 9):
            return f"fp8 (torch._scaled_mm) needs compute capability 8.9+ (Ada, Hopper); {cc}"
        return None
    if precision == "tf32":
        return f"tf32 is an NVIDIA Tensor Core mode; the {device.type} device has no tf32"
    if device.type != "cpu" and precision in ("int8", "fp8"):
        return f"{precision} GEMM is only measured on CUDA and CPU, not on {device.type}"
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
