"""GEMM: the kernel behind fully connected layers, attention projections and most of training.

FLOPs per call: 2*M*N*K per matrix (one multiply and one add per term of each
dot product), times the batch. Operands are allocated once and the product is
written into a preallocated output, as DeepBench does, so that allocation is not
what is timed.
"""

from __future__ import annotations

from typing import Iterator

from accelbench.devices import device_label
from accelbench.devices.precision import matmul_mode, torch_dtype, unsupported_reason
from accelbench.kernels.common import (
    TOLERANCE,
    kernel_result,
    prepare,
    relative_error,
    skipped,
    time_kernel,
    wrong_result,
)
from accelbench.kernels.specs import GemmParams
from accelbench.registry import RunContext
from accelbench.results.record import Result

NAME = "kernels/gemm"


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> int:
    return 2 * m * n * k * batch


def gemm_bytes(m: int, n: int, k: int, batch: int, element_size: int) -> int:
    """Minimum traffic: read A and B once, write C once."""
    return (m * k + k * n + m * n) * batch * element_size


def run(params: GemmParams, ctx: RunContext) -> Iterator[Result]:
    import torch

    device, threads = prepare(params)
    record = params.to_dict() | {"device": str(device), "threads": threads}
    reason = unsupported_reason(device, params.precision)
    if reason:
        yield skipped(NAME, record, reason)
        return
    dtype = torch_dtype(params.precision)
    gen = torch.Generator(device="cpu").manual_seed(0)
    shape_a = (params.batch, params.m, params.k)
    shape_b = (params.batch, params.k, params.n)
    a = torch.randn(shape_a, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(shape_b, generator=gen).to(device=device, dtype=dtype)
    c = torch.empty((params.batch, params.m, params.n), device=device, dtype=dtype)
    if params.batch == 1:
        a, b, c = a[0], b[0], c[0]

        def fn() -> object:
            return torch.mm(a, b, out=c)
    else:

        def fn() -> object:
            return torch.bmm(a, b, out=c)

    details = {"device_name": device_label(device), "dtype": str(dtype).replace("torch.", "")}
    with matmul_mode(device, params.precision):
        if params.check:
            ctx.progress("checking against the fp64 reference")
            fn()
            ref = torch.matmul(a.double(), b.double())
            err = relative_error(c, ref)
            del ref
            details["relative_error"] = err
            if err > TOLERANCE[params.precision]:
                yield wrong_result(NAME, record, err, TOLERANCE[params.precision])
                return
        ctx.progress("timing")
        measurement, conditions = time_kernel(fn, device, threads, params)
    yield kernel_result(
        NAME,
        record,
        measurement,
        conditions,
        device=device,
        flops=gemm_flops(params.m, params.n, params.k, params.batch),
        bytes_moved=gemm_bytes(params.m, params.n, params.k, params.batch, a.element_size()),
        precision=params.precision,
        threads=threads,
        details=details,
    )
