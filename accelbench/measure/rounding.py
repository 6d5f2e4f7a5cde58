"""What rounding to a precision does to a model: an FP32 copy whose storage is rounded as the precision rounds
it, the yardstick both accuracy gates hold a candidate's outputs against when no labels judge it."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: how many times further than rounding to its precision a candidate may move the outputs: one bit's worth
HEADROOM = 2.0
#: how many bits coarser the responsiveness check rounds (bf16 -> fp8 e4m3's 4 significant bits, INT8 -> INT4)
COARSER_BITS = 4
#: decided answers needed before their agreement is a test
MIN_DECIDED = 20
#: the agreement MLPerf's loosest gate asks of decided answers (and of an FP32 candidate's answers)
AGREEMENT = 0.99


def quantize(t: "torch.Tensor", dim: int | None, symmetric: bool, bits: int = 8) -> "torch.Tensor":
    """``t`` rounded to ``bits``-bit integers and back: per slice along ``dim`` (weights) or per tensor."""
    import torch

    if dim is None:
        lo, hi = t.amin(), t.amax()
    else:
        axes = [d for d in range(t.dim()) if d != dim]
        lo, hi = t.amin(dim=axes, keepdim=True), t.amax(dim=axes, keepdim=True)
    if symmetric:
        top: int = 2 ** (bits - 1) - 1  # int ** int is Any to a type checker (a negative power is a float)
        scale = torch.maximum(lo.abs(), hi.abs()).clamp_min(1e-12) / top
        return (t / scale).round().clamp(-top, top) * scale
    top = 2**bits - 1
    lo, hi = torch.minimum(lo, torch.zeros_like(lo)), torch.maximum(hi, torch.zeros_like(hi))
    scale = ((hi - lo) / top).clamp_min(1e-12)
    zero = (-lo / scale).round()
    return ((t / scale).round() + zero).clamp(0, top).sub(zero) * scale


def significant(t: "torch.Tensor", bits: int) -> "torch.Tensor":
    """FP32 ``t`` rounded to ``bits`` significant bits (to nearest; the exponent's range kept)."""
    import torch

    drop = 24 - bits
    raw = t.float().contiguous().view(torch.int32)
    return ((raw + (1 << (drop - 1))) & ~((1 << drop) - 1)).view(torch.float32)


def rounded_copy(model: "torch.nn.Module", precision: str, coarser: int = 0) -> "torch.nn.Module | None":
    """A copy of ``model`` computing in FP32 with its storage rounded as ``precision`` rounds it (``coarser`` bits
    fewer: the comparison a broken path resembles); None for fp32, which rounds nothing."""
    import torch

    from accelbench.devices.precision import arithmetic_of, significant_bits, torch_dtype

    arithmetic = arithmetic_of(precision)
    if torch_dtype(arithmetic) == torch.float32:  # fp32, tf32: FP32 storage rounds nothing
        return None
    twin = copy.deepcopy(model).float()
    layers = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear)
    with torch.no_grad():
        if arithmetic == "int8":
            bits = 8 - coarser
            for m in twin.modules():
                if isinstance(m, layers):
                    m.weight.copy_(quantize(m.weight, 0, True, bits))
                    m.register_forward_pre_hook(
                        lambda _m, args: tuple(
                            quantize(a, None, False, bits) if torch.is_tensor(a) else a for a in args
                        )
                    )
            return twin
        stored = significant_bits(arithmetic)
        assert stored is not None, arithmetic  # only int8 stores no significant bits, and it returned above
        dtype, kept = torch_dtype(arithmetic), stored - coarser

        def rnd(t: Any) -> Any:
            if not (torch.is_tensor(t) and t.is_floating_point()):
                return t
            # the dtype itself where it can (fp16's range too), fewer significant bits by hand
            return t.to(dtype).float() if not coarser else significant(t, kept)

        for p in twin.parameters():
            p.copy_(rnd(p))
        twin.register_forward_pre_hook(lambda _m, args: tuple(rnd(a) for a in args))
        for m in twin.modules():
            if not list(m.children()):  # every leaf's output is stored at the precision
                m.register_forward_hook(lambda _m, _args, out: rnd(out))
    return twin
