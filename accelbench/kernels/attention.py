"""Scaled dot-product attention, the core of every transformer, through F.scaled_dot_product_attention.

FLOPs of the forward pass: 4 * batch * heads * seq_len^2 * head_dim, two matrix
products (Q @ K^T and P @ V) of 2 * S * S * D each; a causal mask skips half of
the score matrix, so it counts half. The backward pass counts 2.5x the forward
(five S x S x D products: recomputing the scores, and the gradients of Q, K, V
and P), so ``fwd_bwd`` is 3.5x forward: the convention of FlashAttention's
published benchmarks, which makes figures comparable with theirs.
PyTorch picks the kernel (FlashAttention, memory-efficient, or math); the one it
could use is recorded with the result.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterator, cast

from accelbench.devices import device_label, resolve_device
from accelbench.devices.kind import kind_of
from accelbench.devices.precision import FLOAT_PRECISIONS, torch_dtype
from accelbench.kernels.common import KernelCase, max_relative_error, native_precision, run_kernel
from accelbench.kernels.specs import AttentionParams
from accelbench.kit.context import RunContext
from accelbench.results.record import Result

if TYPE_CHECKING:
    import torch

SUPPORTED = FLOAT_PRECISIONS


def attention_flops(p: AttentionParams) -> float:
    forward: float = 4 * p.batch * p.heads * p.seq_len * p.seq_len * p.dim
    if p.causal:
        forward /= 2
    return forward * (3.5 if p.phase == "fwd_bwd" else 1.0)


def attention_bytes(p: AttentionParams, element_size: int) -> int:
    """Read Q, K, V and write O once (a fused kernel never stores the S x S scores)."""
    one = p.batch * p.heads * p.seq_len * p.dim
    forward = 4 * one * element_size
    return forward * (3 if p.phase == "fwd_bwd" else 1)


#: The slice of the problem the fp64 reference checks: one batch item, two heads.
REF_BATCH, REF_HEADS = 1, 2


def _backend(q: "torch.Tensor", causal: bool) -> str:
    """The fused kernel PyTorch can use for these inputs, as the device's kind can tell, or 'math'."""
    return kind_of(q.device).attention_backend(q, causal)


def build_case(p: AttentionParams, device: "torch.device") -> KernelCase:
    import torch
    import torch.nn.functional as F

    gen = torch.Generator(device="cpu").manual_seed(0)
    dtype = torch_dtype(p.precision)
    train = p.phase == "fwd_bwd"
    shape = (p.batch, p.heads, p.seq_len, p.dim)
    q, k, v = (torch.randn(shape, generator=gen).to(device=device, dtype=dtype).requires_grad_(train) for _ in range(3))
    grad = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)

    def step(
        qq: "torch.Tensor", kk: "torch.Tensor", vv: "torch.Tensor", g: "torch.Tensor"
    ) -> tuple["torch.Tensor", ...]:
        if not train:
            with kind_of(device).no_grad():
                return (F.scaled_dot_product_attention(qq, kk, vv, is_causal=p.causal),)
        for t in (qq, kk, vv):
            t.grad = None
        out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=p.causal)
        out.backward(g)
        # backward filled the inputs' grads (each requires one)
        return cast("tuple[torch.Tensor, ...]", (out.detach(), qq.grad, kk.grad, vv.grad))

    def fn() -> tuple["torch.Tensor", ...]:
        return step(q, k, v, grad)

    def error() -> float:
        # Heads and batch items are independent, so a slice checks the kernel: the fp64 reference of the
        # whole problem materialises B*H*S^2 scores (tens of GB at 8k tokens) and would not fit beside it.
        outs = tuple(o[:REF_BATCH, :REF_HEADS] for o in fn())
        qr, kr, vr = (t.detach()[:REF_BATCH, :REF_HEADS].double().requires_grad_(train) for t in (q, k, v))
        refs = step(qr, kr, vr, grad[:REF_BATCH, :REF_HEADS].double())
        return max_relative_error(outs, refs)

    return KernelCase(
        fn=fn,
        precision=p.precision,
        flops=attention_flops(p),
        bytes_moved=attention_bytes(p, q.element_size()),
        error=error,
        details={"device_name": device_label(device), "head_dim": p.dim, "sdpa_backend": _backend(q, p.causal)},
    )


def run(params: AttentionParams, ctx: RunContext) -> Iterator[Result]:
    if params.precision == "auto":  # the record keeps the precision that ran, never "auto"
        params = replace(params, precision=native_precision(resolve_device(params.device)))
    return run_kernel(params, ctx, build_case, SUPPORTED, record_extra={"head_dim": params.dim})
