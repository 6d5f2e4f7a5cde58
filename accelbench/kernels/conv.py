"""2-D convolution: forward, backward-data and backward-filter, as cuDNN/oneDNN run them.

FLOPs of each pass: 2 * N * K * P * Q * (C / groups) * R * S, where P x Q is the
output size and R x S the filter (one multiply-add per filter tap, per input
channel of the group, per output element). Backward-data and backward-filter
perform the same number of multiply-adds as forward; ``fwd_bwd`` is all three.
The backward passes call ``torch.nn.grad.conv2d_input``/``conv2d_weight``, which
run ATen's ``convolution_backward`` (the cuDNN/oneDNN kernels training uses).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator

from accelbench.devices import device_label
from accelbench.devices.precision import FLOAT_PRECISIONS, torch_dtype
from accelbench.kernels.common import KernelCase, max_relative_error, run_kernel
from accelbench.kernels.specs import ConvParams
from accelbench.kit.context import RunContext
from accelbench.results.record import Result

if TYPE_CHECKING:
    import torch

SUPPORTED = FLOAT_PRECISIONS


def conv_flops(p: ConvParams) -> int:
    out_h, out_w = p.output_hw()
    one_pass = 2 * p.n * p.k * out_h * out_w * (p.c // p.groups) * p.filter_h * p.filter_w
    return one_pass * (3 if p.phase == "fwd_bwd" else 1)


def conv_bytes(p: ConvParams, element_size: int) -> int:
    """Minimum traffic of each pass: read two of input/filter/output, write the third."""
    out_h, out_w = p.output_hw()
    x = p.n * p.c * p.h * p.w
    wgt = p.k * (p.c // p.groups) * p.filter_h * p.filter_w
    y = p.n * p.k * out_h * out_w
    return (x + wgt + y) * element_size * (3 if p.phase == "fwd_bwd" else 1)


def _passes(p: ConvParams) -> Callable[..., object]:
    """The phase as a function of (x, weight, grad_out)."""
    import torch
    import torch.nn.functional as F
    import torch.nn.grad

    stride, padding = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w)

    def fwd(x: "torch.Tensor", wgt: "torch.Tensor", gy: "torch.Tensor") -> object:
        return F.conv2d(x, wgt, stride=stride, padding=padding, groups=p.groups)

    def bwd_data(x: "torch.Tensor", wgt: "torch.Tensor", gy: "torch.Tensor") -> object:
        return torch.nn.grad.conv2d_input(x.shape, wgt, gy, stride=stride, padding=padding, groups=p.groups)

    def bwd_filter(x: "torch.Tensor", wgt: "torch.Tensor", gy: "torch.Tensor") -> object:
        return torch.nn.grad.conv2d_weight(x, wgt.shape, gy, stride=stride, padding=padding, groups=p.groups)

    def fwd_bwd(x: "torch.Tensor", wgt: "torch.Tensor", gy: "torch.Tensor") -> object:
        return fwd(x, wgt, gy), bwd_data(x, wgt, gy), bwd_filter(x, wgt, gy)

    return {"fwd": fwd, "bwd_data": bwd_data, "bwd_filter": bwd_filter, "fwd_bwd": fwd_bwd}[p.phase]


def build_case(p: ConvParams, device: "torch.device") -> KernelCase:
    import torch

    gen = torch.Generator(device="cpu").manual_seed(0)
    dtype = torch_dtype(p.precision)
    out_h, out_w = p.output_hw()
    fmt = torch.channels_last if p.layout == "nhwc" else torch.contiguous_format

    def make(*shape: int) -> "torch.Tensor":
        t = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
        return t.contiguous(memory_format=fmt)

    x = make(p.n, p.c, p.h, p.w)
    wgt = make(p.k, p.c // p.groups, p.filter_h, p.filter_w)
    gy = make(p.n, p.k, out_h, out_w)
    op = _passes(p)

    def fn() -> object:
        return op(x, wgt, gy)

    def error() -> float:
        return max_relative_error(fn(), op(x.double(), wgt.double(), gy.double()))

    return KernelCase(
        fn=fn,
        precision=p.precision,
        flops=conv_flops(p),
        bytes_moved=conv_bytes(p, x.element_size()),
        error=error,
        details={"device_name": device_label(device), "output_hw": [out_h, out_w]},
    )


def run(params: ConvParams, ctx: RunContext) -> Iterator[Result]:
    return run_kernel(params, ctx, build_case, SUPPORTED)
