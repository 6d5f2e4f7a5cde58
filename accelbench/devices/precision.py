"""The precision table (:data:`PRECISIONS`), which numeric precisions a device can run, and how to switch
torch into each.

Precisions the device cannot run produce a ``skipped`` record with the reason
from :func:`unsupported_reason` instead of a crash or a silently wrong number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Precision:
    """What one precision name means, everywhere: the one table every family, the peak lookup and the
    accuracy gate read (dtypes are named by their ``torch`` attribute, so that reading the table imports
    nothing)."""

    name: str
    #: the dtype operands and weights are stored in (tf32 stores FP32; amp_* keeps FP32 weights)
    storage: str
    #: the precision whose arithmetic it runs in (amp_* autocasts to fp16/bf16 and computes there)
    arithmetic: str
    #: the column of accelerator_specs.csv (and of the CPU estimate) its figures are judged against
    peak: str
    #: the dtype torch.autocast casts to (amp_*), None where nothing autocasts
    autocast: str | None = None
    #: TF32 Tensor Core math (cuBLAS matmuls and cuDNN convolutions) is on exactly for this precision
    tf32: bool = False
    #: significant bits (the implicit one included) of the values it stores between operations: what the
    #: accuracy gate's rounded twin rounds to; None for integers, which are quantised instead
    significant_bits: int | None = None


#: Every precision name any family accepts, and what it means.
PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", "float32", "fp32", "fp32", significant_bits=24),
        # TF32 rounds only inside Tensor Core matmuls and convolutions: what it stores is FP32
        Precision("tf32", "float32", "tf32", "tf32", tf32=True, significant_bits=24),
        Precision("fp16", "float16", "fp16", "fp16", significant_bits=11),
        Precision("bf16", "bfloat16", "bf16", "bf16", significant_bits=8),
        Precision("int8", "int8", "int8", "int8"),
        Precision("fp8", "float8_e4m3fn", "fp8", "fp8", significant_bits=4),
        # autocast stores each matmul's and convolution's output in the autocast dtype
        Precision("amp_fp16", "float32", "fp16", "fp16", autocast="float16", significant_bits=11),
        Precision("amp_bf16", "float32", "bf16", "bf16", autocast="bfloat16", significant_bits=8),
    )
}

#: Floating-point precisions every compute kernel accepts.
FLOAT_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
#: Precisions of matrix-multiply kernels: integer and 8-bit float through torch._int_mm / torch._scaled_mm.
MATMUL_PRECISIONS = (*FLOAT_PRECISIONS, "int8", "fp8")
ALL_PRECISIONS = MATMUL_PRECISIONS


def _dtype(name: str | None) -> "torch.dtype | None":
    if name is None:
        return None
    import torch

    return getattr(torch, name)


def torch_dtype(precision: str) -> "torch.dtype":
    """The storage dtype of the operands; tf32 stores fp32 and computes on Tensor Cores."""
    return _dtype(PRECISIONS[precision].storage)  # type: ignore[return-value]


def autocast_dtype(precision: str) -> "torch.dtype | None":
    """The dtype torch.autocast casts to for an ``amp_*`` precision; None for any other name."""
    p = PRECISIONS.get(precision)
    return _dtype(p.autocast) if p is not None else None


def model_dtype(precision: str) -> "torch.dtype | None":
    """The dtype a model's weights and floating inputs are converted to (bf16, fp16: no FP32 master copy), or
    None where they stay FP32 (fp32, tf32, and amp_*, whose autocast casts per operation)."""
    p = PRECISIONS.get(precision)
    return _dtype(p.storage) if p is not None and p.storage != "float32" else None


def arithmetic_of(precision: str) -> str:
    """The precision whose arithmetic ``precision`` runs in (amp_fp16: fp16); a name the table lacks, itself."""
    p = PRECISIONS.get(precision)
    return p.arithmetic if p is not None else precision


def peak_key(precision: str) -> str:
    """The peak figure ``precision`` is judged against (a column of the spec table, or the CPU estimate's key);
    a name the table lacks, itself."""
    p = PRECISIONS.get(precision)
    return p.peak if p is not None else precision


def tf32_math(precision: str) -> bool:
    """Whether ``precision`` runs with TF32 math on: exactly for tf32 (a name the table lacks, "auto": no)."""
    p = PRECISIONS.get(precision)
    return p is not None and p.tf32


def no_tf32_reason(what: str) -> str:
    """The one TF32 rule, in words: TF32 is a format of NVIDIA's Tensor Cores, so ``what`` (a kind's device,
    a named GPU) without them cannot run the tf32 precision; every kind says it through this."""
    return f"tf32 is an NVIDIA Tensor Core mode; {what} has no tf32"


def significant_bits(precision: str) -> int | None:
    """Significant bits of the values ``precision`` stores between operations; None for int8 (quantised)."""
    return PRECISIONS[precision].significant_bits


def unsupported_reason(device: "torch.device", precision: str) -> str | None:
    """Why ``device`` cannot run ``precision`` at all, or None when it can (its kind knows)."""
    from accelbench.devices.kind import kind_of

    return kind_of(device).unsupported(device, precision)


def emulated_reason(device: "torch.device", precision: str, allowed: bool = False) -> str | None:
    """Why a figure at ``precision`` would measure an emulation on this CPU, unless ``allowed`` (--emulated).

    A benchmark measures what the machine can do: an emulated precision's figure (fp16 at 1 GFLOPS on an
    AVX2 CPU) is a fact about torch's fallback, not the hardware, so it is skipped with the reason unless asked.
    """
    if allowed or device.type != "cpu":
        return None
    from accelbench.devices.host import cpu_flags
    from accelbench.devices.host import emulated_reason as cpu_reason

    why = cpu_reason(arithmetic_of(precision), cpu_flags())
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

    torch's defaults differ between libraries (cuDNN convolutions may use TF32, cuBLAS matmuls not), so
    "fp32" would silently be TF32 in convolutions: TF32 is on for both exactly where the table says
    (``tf32``); a kind with its own default (XLA multiplies FP32 in one bf16 pass on a TPU) sets its mode
    through :meth:`DeviceKind.numeric_mode`. ``autotune`` lets cuDNN pick the fastest convolution algorithm
    per shape, as
    tf_cnn_benchmarks, DeepBench and MLPerf do; the search runs in the warm-up. Serving, whose batches
    vary in size, turns it off so that no search lands inside a timed run. Returns the mode it set.
    """
    import torch

    from accelbench.devices.kind import kind_of

    tf32 = tf32_math(precision)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    benchmark = autotune and device.type == "cuda"
    torch.backends.cudnn.benchmark = benchmark
    return {"tf32": tf32, "cudnn_benchmark": benchmark} | kind_of(device).numeric_mode(device, precision)
