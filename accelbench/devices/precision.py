"""Which numeric precisions a device can run, and how to switch torch into each.

Precisions the device cannot run produce a ``skipped`` record with the reason
from :func:`unsupported_reason` instead of a crash or a silently wrong number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    """Why ``device`` cannot run ``precision`` at all, or None when it can (its kind knows)."""
    from accelbench.devices.kind import kind_of

    return kind_of(device).unsupported(device, precision)


#: The precision whose arithmetic an autocast or a kernel precision runs in.
ARITHMETIC = {"amp_fp16": "fp16", "amp_bf16": "bf16"}


def emulated_reason(device: "torch.device", precision: str, allowed: bool = False) -> str | None:
    """Why a figure at ``precision`` would measure an emulation on this CPU, unless ``allowed`` (--emulated).

    A benchmark measures what the machine can do: an emulated precision's figure (fp16 at 1 GFLOPS on an
    AVX2 CPU) is a fact about torch's fallback, not the hardware, so it is skipped with the reason unless asked.
    """
    if allowed or device.type != "cpu":
        return None
    from accelbench.devices.host import cpu_flags
    from accelbench.devices.host import emulated_reason as cpu_reason

    why = cpu_reason(ARITHMETIC.get(precision, precision), cpu_flags())
    # the way forward first: the precision this CPU computes natively, then the emulation (attention's fp16
    # default is skipped on most CPUs; a hint naming only --emulated sent users to measure torch's fallback)
    return f"{why}; --precision fp32 measures what it computes natively, --emulated measures it anyway" if why else None


def precision_reason(device: "torch.device", precision: str, emulated: bool = False) -> str | None:
    """Why a figure at ``precision`` (a dtype, or an ``amp_*`` autocast) would not be the hardware's, or None.

    The one check every family makes: the device cannot run the arithmetic (tf32 on a CPU; bf16 before
    Ampere, where autocast would run but many times slower), or this CPU only emulates it (unless asked).
    """
    arithmetic = ARITHMETIC.get(precision, precision)
    return unsupported_reason(device, arithmetic) or emulated_reason(device, arithmetic, emulated)


def set_numeric_mode(device: "torch.device", precision: str, autotune: bool = True) -> dict[str, bool]:
    """Set, for this process, the math the precision names: the one place every family's mode comes from.

    torch's defaults differ between libraries (cuDNN convolutions may use TF32, cuBLAS matmuls not), so
    "fp32" would silently be TF32 in convolutions: TF32 is on for both exactly when ``precision`` is
    ``tf32``. ``autotune`` lets cuDNN pick the fastest convolution algorithm per shape, as
    tf_cnn_benchmarks, DeepBench and MLPerf do; the search runs in the warm-up. Serving, whose batches
    vary in size, turns it off so that no search lands inside a timed run. Returns the mode it set.
    """
    import torch

    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    benchmark = autotune and device.type == "cuda"
    torch.backends.cudnn.benchmark = benchmark
    return {"tf32": tf32, "cudnn_benchmark": benchmark}
