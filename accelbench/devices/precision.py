"""Which numeric precisions a device can run (its kind says), and how to switch torch into each; the table
itself (:data:`PRECISIONS`, what each name means) is :mod:`accelbench.devices.table`, re-exported here.

Precisions the device cannot run produce a ``skipped`` record with the reason
from :func:`unsupported_reason` instead of a crash or a silently wrong number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.devices import host
from accelbench.devices.kind import kind_of
from accelbench.devices.table import (
    ALL_PRECISIONS,
    FLOAT_PRECISIONS,
    MATMUL_PRECISIONS,
    PRECISIONS,
    Precision,
    arithmetic_of,
    autocast_dtype,
    model_dtype,
    no_tf32_reason,
    peak_key,
    significant_bits,
    tf32_math,
    torch_dtype,
)

__all__ = [
    "Precision",
    "PRECISIONS",
    "FLOAT_PRECISIONS",
    "MATMUL_PRECISIONS",
    "ALL_PRECISIONS",
    "torch_dtype",
    "autocast_dtype",
    "model_dtype",
    "arithmetic_of",
    "peak_key",
    "tf32_math",
    "no_tf32_reason",
    "significant_bits",
    "emulated_reason",
    "precision_reason",
    "set_numeric_mode",
    "unsupported_reason",
]

if TYPE_CHECKING:
    import torch


def unsupported_reason(device: "torch.device", precision: str) -> str | None:
    """Why ``device`` cannot run ``precision`` at all, or None when it can (its kind knows)."""
    return kind_of(device).unsupported(device, precision)


def emulated_reason(device: "torch.device", precision: str, allowed: bool = False) -> str | None:
    """Why a figure at ``precision`` would measure an emulation on this CPU, unless ``allowed`` (--emulated).

    A benchmark measures what the machine can do: an emulated precision's figure (fp16 at 1 GFLOPS on an
    AVX2 CPU) is a fact about torch's fallback, not the hardware, so it is skipped with the reason unless asked.
    """
    if allowed or device.type != "cpu":
        return None
    why = host.emulated_reason(arithmetic_of(precision), host.cpu_flags())
    # the way forward first: the precision this CPU computes natively, then the emulation (a hint naming only
    # --emulated sends users to measure torch's fallback)
    return f"{why}; --precision fp32 measures what it computes natively, --emulated measures it anyway" if why else None


def precision_reason(device: "torch.device", precision: str, emulated: bool = False) -> str | None:
    """Why a figure at ``precision`` (a dtype, or an ``amp_*`` autocast) would not be the hardware's, or None.

    The one check every family makes: the device cannot run the arithmetic (tf32 on a CPU; bf16 before
    Ampere, where autocast would run but many times slower), or this CPU only emulates it (unless asked).
    """
    arithmetic = arithmetic_of(precision)
    return unsupported_reason(device, arithmetic) or emulated_reason(device, arithmetic, emulated)


def set_numeric_mode(device: "torch.device", precision: str, autotune: bool = True) -> dict[str, bool]:
    """Set, for this process, the math the precision names: the one place every family's mode comes from.

    torch's defaults let cuDNN convolutions use TF32 and cuBLAS matmuls not, so "fp32" would silently be TF32 in
    convolutions: TF32 is on for both exactly for ``tf32``; a kind with its own default (XLA on a TPU) sets its mode
    through :meth:`DeviceKind.numeric_mode`. ``autotune`` lets cuDNN search each shape's fastest algorithm in the
    warm-up, as tf_cnn_benchmarks and MLPerf do; serving, whose batches vary, turns it off. Returns the mode set."""
    import torch

    tf32 = tf32_math(precision)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    benchmark = autotune and device.type == "cuda"
    torch.backends.cudnn.benchmark = benchmark
    return {"tf32": tf32, "cudnn_benchmark": benchmark} | kind_of(device).numeric_mode(device, precision)
