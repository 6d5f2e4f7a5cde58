"""The precision table (:data:`PRECISIONS`): what each precision name means, everywhere.

A leaf: it imports nothing of accelbench, so the device kinds (which say which precisions they run) and the
precision rules that ask a device's kind (:mod:`accelbench.devices.precision`) both stand on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

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


@overload
def _dtype(name: str) -> "torch.dtype": ...
@overload
def _dtype(name: None) -> None: ...
@overload
def _dtype(name: str | None) -> "torch.dtype | None": ...


def _dtype(name: str | None) -> "torch.dtype | None":
    if name is None:
        return None
    import torch

    dtype: torch.dtype = getattr(torch, name)
    return dtype


def torch_dtype(precision: str) -> "torch.dtype":
    """The storage dtype of the operands; tf32 stores fp32 and computes on Tensor Cores."""
    return _dtype(PRECISIONS[precision].storage)


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
