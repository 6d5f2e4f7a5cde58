"""Sparse x dense matrix multiply: pruned weights times activations (DeepBench's sparse GEMM).

``csr``: A stored in compressed sparse rows (torch.sparse_csr_tensor, cuSPARSE on
CUDA, MKL/oneDNN on CPU) at the requested density. ``semi24``: NVIDIA's 2:4
semi-structured sparsity (two non-zeros in every four), run by cuSPARSELt/CUTLASS
through torch.sparse.to_sparse_semi_structured on Ampere and newer GPUs.
FLOPs: the useful work is 2 * nnz(A) * N (``tflops``); ``effective_tflops`` counts
the dense 2 * M * N * K, the rate a dense GEMM would need to finish as fast.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Iterator

from accelbench.devices import device_label
from accelbench.devices.kind import kind_of
from accelbench.devices.precision import torch_dtype
from accelbench.errors import BenchmarkSkipped
from accelbench.kernels.common import KernelCase, relative_error, run_kernel
from accelbench.kernels.specs import SparseParams
from accelbench.kit.context import RunContext
from accelbench.results.record import Result

if TYPE_CHECKING:
    import torch

SUPPORTED = ("fp32", "fp16", "bf16", "int8")


def sparse_flops(nnz: int, n: int) -> int:
    return 2 * nnz * n


def _pruned(p: SparseParams, gen: "torch.Generator") -> "torch.Tensor":
    """A dense m x k matrix with the sparsity pattern of the format (random, or 2 of every 4)."""
    import torch

    a = torch.randn(p.m, p.k, generator=gen)
    if p.format == "semi24":
        mask = torch.tensor([1, 1, 0, 0], dtype=torch.bool).repeat(p.m, p.k // 4)
        return a * mask
    keep = torch.rand(p.m, p.k, generator=gen) < p.density
    return a * keep


def setup_reason(p: SparseParams, device: "torch.device") -> str | None:
    if p.format == "semi24":
        why = kind_of(device).semi_structured_reason(device)
        if why:
            return why
        if p.precision == "fp32":
            return "2:4 semi-structured sparsity runs in fp16, bf16 or int8, not fp32"
        if p.k % 4:
            return "2:4 semi-structured sparsity needs K to be a multiple of 4"
    elif p.precision == "int8":
        return "int8 CSR matrix multiply has no PyTorch kernel; use --format semi24 on a GPU"
    return None


def build_case(p: SparseParams, device: "torch.device") -> KernelCase:
    import torch

    gen = torch.Generator(device="cpu").manual_seed(0)
    dtype = torch_dtype(p.precision)
    dense_a = _pruned(p, gen)
    if p.precision == "int8":
        dense_a = dense_a.mul(30).round().clamp(-127, 127)
    b = torch.randn(p.k, p.n, generator=gen)
    if p.precision == "int8":
        b = b.mul(30).round().clamp(-127, 127)
    dense_a = dense_a.to(device=device, dtype=dtype)
    b = b.to(device=device, dtype=dtype)
    nnz = int((dense_a != 0).sum().item())
    a: torch.Tensor  # 2:4 semi-structured (a Tensor subclass) or CSR
    try:
        if p.format == "semi24":
            from torch.sparse import to_sparse_semi_structured

            a = to_sparse_semi_structured(dense_a)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
                a = dense_a.to_sparse_csr()
        probe = a @ b  # fail early if this dtype/device has no kernel
    except (RuntimeError, NotImplementedError) as exc:
        raise BenchmarkSkipped(
            f"{p.format} sparse {p.precision} on {device.type}: {str(exc).splitlines()[0]}"
        ) from None

    if probe.dtype == torch.int8:
        # cuSPARSELt's int8 product writes int8 by default: sums of K products wrap around, so no run would
        # pass the reference check, and torch documents no way to ask this operator for an int32 output
        raise BenchmarkSkipped(
            "2:4 int8 sparse writes an int8 output here, which wraps around (int32 accumulation is not "
            "exposed by torch's semi-structured operator): use fp16 or bf16"
        )

    def fn() -> "torch.Tensor":
        return a @ b

    def error() -> float:
        return relative_error(fn(), dense_a.double() @ b.double())

    el = dense_a.element_size()
    index_bytes = 8 * (nnz + p.m + 1) if p.format == "csr" else nnz // 8
    return KernelCase(
        fn=fn,
        precision=p.precision,
        flops=sparse_flops(nnz, p.n),
        bytes_moved=nnz * el + index_bytes + (p.k * p.n + p.m * p.n) * el,
        error=error,
        details={"device_name": device_label(device), "nnz": nnz, "actual_density": nnz / (p.m * p.k)},
        extra_flops={"effective_tflops": 2.0 * p.m * p.n * p.k},
    )


def run(params: SparseParams, ctx: RunContext) -> Iterator[Result]:
    return run_kernel(params, ctx, build_case, SUPPORTED, shape_reason=setup_reason)
