"""Scaled dot-product attention, the core of every transformer, through F.scaled_dot_product_attention.

FLOPs follow FlashAttention's published benchmarks, so figures compare with theirs: 4 * batch * heads * seq_len^2
* head_dim forward (half with a causal mask), 3.5x that with the backward (docs/kernels.md). PyTorch picks the
kernel; the record names the one that ran, seen by which operator the call dispatched to, not what a constraint
check says could run (:func:`backend_that_ran`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, cast

from accelbench.devices import device_label, resolve_device
from accelbench.devices.kind import kind_of
from accelbench.devices.precision import FLOAT_PRECISIONS, torch_dtype
from accelbench.kernels.common import KernelCase, KernelDetails, max_relative_error, native_precision, run_kernel
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


#: the operator each SDPA backend dispatches to, and the name the record gives it
SDPA_OPS = {
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_flash_attention_for_cpu": "flash-cpu",
    "_scaled_dot_product_efficient_attention": "memory-efficient",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
    "_scaled_dot_product_attention_math_for_mps": "math-mps",
    "_scaled_dot_product_attention_math": "math",
}
#: what the record's names mean, for a reader
SDPA_MEANING = {
    "cudnn": "cuDNN's fused attention (SDPBackend.CUDNN_ATTENTION)",
    "flash": "FlashAttention (SDPBackend.FLASH_ATTENTION)",
    "flash-cpu": "PyTorch's CPU flash-attention kernel (SDPBackend.FLASH_ATTENTION on the CPU)",
    "memory-efficient": "the memory-efficient kernel (SDPBackend.EFFICIENT_ATTENTION)",
    "overrideable": "the device's own fused kernel (SDPBackend.OVERRIDEABLE)",
    "math-mps": "the MPS math kernel (SDPBackend.MATH)",
    "math": "the unfused math path, matmuls and a softmax (SDPBackend.MATH)",
}


def _seen_ops(call: Callable[[], object]) -> list[str]:
    """The ATen operators ``call`` dispatched to, in order, below autograd (a dispatch mode sees every one)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class _Watch(TorchDispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            seen.append(str(getattr(func, "__name__", func)).split(".")[0])
            return func(*args, **(kwargs or {}))

    with _Watch():  # type: ignore[no-untyped-call]  # TorchDispatchMode.__init__ carries no annotations
        call()
    return seen


def backend_that_ran(call: Callable[[], object]) -> tuple[str, str]:
    """(backend, the operator seen) of one SDPA ``call``, run once.

    The dispatcher's choice depends on the inputs, the enabled backends, their priority order (cuDNN's
    among them) and each backend's constraints, of which a prediction checks only some; the operator the
    call reached says which ran. The math path has no operator of its own on most devices (it decomposes into matmuls
    and a softmax), so a call that reached none of the fused ones but did a matrix product ran it.
    """
    ops = _seen_ops(call)
    for op in ops:
        if op in SDPA_OPS:
            return SDPA_OPS[op], f"aten::{op}"
    if any(op in ("bmm", "matmul", "baddbmm") for op in ops):
        return "math", "aten::bmm (no fused attention operator)"
    return "unknown", "no attention operator seen"


def _backend(q: "torch.Tensor", causal: bool) -> str:
    """The fused kernel the device's kind says PyTorch can use for these inputs, or 'math': a prediction, the
    record's answer only where the call could not be watched."""
    return kind_of(q.device).attention_backend(q, causal)


def _backend_details(call: Callable[[], object], q: "torch.Tensor", causal: bool) -> KernelDetails:
    """The record's ``sdpa_backend`` (the backend that ran) and ``sdpa_backend_seen`` (the evidence)."""
    try:
        backend, op = backend_that_ran(call)
    except (RuntimeError, TypeError, NotImplementedError) as exc:  # a device whose tensors refuse a dispatch mode
        why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        return {"sdpa_backend": _backend(q, causal), "sdpa_backend_seen": f"not seen ({why}): the kind's prediction"}
    if backend == "unknown":
        return {"sdpa_backend": _backend(q, causal), "sdpa_backend_seen": f"not seen ({op}): the kind's prediction"}
    meaning = SDPA_MEANING.get(backend)
    return {"sdpa_backend": backend, "sdpa_backend_seen": op + (f": {meaning}" if meaning else "")}


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

    def forward() -> object:
        """The timed call's forward with grad on or off as there, which steers the choice (a backend must
        support backward when grads are needed). torch.no_grad, not inference mode: under inference mode a
        dispatch watcher sees only the composite operator, never the kernel below it; both turn grads off,
        which is all the choice reads of them."""
        with torch.set_grad_enabled(train):
            return F.scaled_dot_product_attention(q, k, v, is_causal=p.causal)

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
        details=KernelDetails(device_name=device_label(device), head_dim=p.dim)
        | _backend_details(forward, q, p.causal),
    )


def run(params: AttentionParams, ctx: RunContext) -> Iterator[Result]:
    device = resolve_device(params.device)
    if params.precision == "auto":  # the record keeps the precision that ran, never "auto"
        params = replace(params, precision=native_precision(device))
    yield from run_kernel(params, ctx, build_case, SUPPORTED, record_extra={"head_dim": params.dim})
