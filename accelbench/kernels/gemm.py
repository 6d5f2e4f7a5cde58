"""GEMM: the kernel behind fully connected layers, attention projections and most of training.

2*M*N*K FLOPs per matrix, times the batch. Operands are allocated once and the product written into a
preallocated output where torch allows, as DeepBench does, so that allocation is not what is timed. int8 and fp8
run through PyTorch's documented paths (``torch._int_mm``, ``torch._scaled_mm``); fp8's two accumulations run at
different speeds against one datasheet peak, so the record names the one that ran (:func:`fp8_accumulation`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from accelbench.devices import device_label
from accelbench.devices.kind import kind_of
from accelbench.devices.precision import MATMUL_PRECISIONS, torch_dtype
from accelbench.kernels.common import KernelCase, KernelDetails, relative_error, run_kernel
from accelbench.kernels.specs import GemmParams
from accelbench.kit.context import RunContext
from accelbench.results.record import Result

if TYPE_CHECKING:
    import torch

LOW = ("int8", "fp8")  # torch._int_mm / torch._scaled_mm: 2-D, fixed operand layout


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> int:
    return 2 * m * n * k * batch


def gemm_bytes(m: int, n: int, k: int, batch: int, in_size: int, out_size: int | None = None) -> int:
    """Minimum traffic: read A and B once, write C once."""
    return ((m * k + k * n) * in_size + m * n * (out_size or in_size)) * batch


def _operand(rows: int, cols: int, batch: int, transposed: bool, gen: "torch.Generator") -> "torch.Tensor":
    """A [batch,] rows x cols operand, stored transposed (a strided view) when asked."""
    import torch

    shape = (batch, cols, rows) if transposed else (batch, rows, cols)
    t = torch.randn(shape, generator=gen)
    return t.transpose(-1, -2) if transposed else t


def low_precision_reason(p: GemmParams, device: "torch.device") -> str | None:
    """Shape limits of torch's int8/fp8 GEMM paths."""
    if p.precision not in ("int8", "fp8"):
        return None
    if p.batch > 1:
        return f"batched {p.precision} GEMM has no documented PyTorch path (torch._int_mm/_scaled_mm are 2-D)"
    if p.precision == "fp8" and any(d % 16 for d in (p.m, p.n, p.k)):
        return "fp8 GEMM (torch._scaled_mm) needs M, N and K to be multiples of 16"
    if p.precision == "int8":
        return kind_of(device).int8_gemm_reason(p.m, p.k, p.n)
    return None


def fp8_accumulation(fast_accum: bool) -> KernelDetails:
    """How an fp8 GEMM accumulated, and what its % of peak is taken against, for the record.

    ``torch._scaled_mm`` defaults to ``use_fast_accum=False``: on Hopper cuBLAS then adds the Tensor Cores'
    partial sums into FP32 at intervals, which is more accurate and slower than accumulating in the Tensor
    Cores alone (``True``). The spec table has one dense FP8 peak for both, so without the accumulation a share
    of that peak cannot be read, nor two fp8 records compared.
    """
    how = (
        "Tensor Core accumulator only, no FP32 promotion (use_fast_accum=True)"
        if fast_accum
        else "partial sums promoted to FP32 (use_fast_accum=False, torch._scaled_mm's default)"
    )
    return {
        "use_fast_accum": fast_accum,
        "fp8_accumulation": how,
        "fp8_peak_basis": "the dense FP8 Tensor Core peak of accelbench's spec table, one figure for either "
        "accumulation: it counts no FP32 promotion work"
        + ("" if fast_accum else ", so this accumulation reads lower against it than use_fast_accum=True would"),
    }


def build_case(p: GemmParams, device: "torch.device") -> KernelCase:
    import torch

    gen = torch.Generator(device="cpu").manual_seed(0)
    dtype = torch_dtype(p.precision)
    a32 = _operand(p.m, p.k, p.batch, p.a_t, gen)
    b32 = _operand(p.k, p.n, p.batch, p.b_t, gen)
    if p.precision == "int8":
        a32, b32 = (t.mul(30).round().clamp(-127, 127) for t in (a32, b32))
    a = a32.to(device=device, dtype=dtype)
    b = b32.to(device=device, dtype=dtype)
    out_size = a.element_size()
    if p.precision == "int8":
        # cuBLASLt's int8 (IMMA) kernels take A row-major and B column-major (the "TN" layout); with both
        # row-major ("NN") it answers CUBLAS_STATUS_NOT_SUPPORTED on several GPUs (PyTorch's own
        # test__int_mm skips that case). a_t/b_t cannot choose the layout here: it is recorded instead.
        a, b = a[0].contiguous(), b[0].t().contiguous().t()

        def fn() -> "torch.Tensor":
            return torch._int_mm(a, b)

        out_size = 4
    elif p.precision == "fp8":
        a, b = a[0].contiguous(), b[0].t().contiguous().t()  # _scaled_mm wants A row-major, B column-major
        one = torch.ones((), device=device)
        fast = p.fast_accum

        def fn() -> "torch.Tensor":
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast)

        out_size = 2
    else:
        c = torch.empty((p.batch, p.m, p.n), device=device, dtype=dtype)
        if p.batch == 1:
            a, b, c2 = a[0], b[0], c[0]

            def fn() -> "torch.Tensor":
                return torch.mm(a, b, out=c2)
        else:

            def fn() -> "torch.Tensor":
                return torch.bmm(a, b, out=c)

    def error() -> float:
        out = fn()
        return relative_error(out, torch.matmul(a.double(), b.double()))

    return KernelCase(
        fn=fn,
        precision=p.precision,
        flops=gemm_flops(p.m, p.n, p.k, p.batch),
        bytes_moved=gemm_bytes(p.m, p.n, p.k, p.batch, a.element_size(), out_size),
        error=error,
        details=KernelDetails(device_name=device_label(device), dtype=str(dtype).replace("torch.", ""))
        | (KernelDetails(operand_layout="A row-major, B column-major (cuBLASLt TN)") if p.precision in LOW else {})
        | (fp8_accumulation(fast) if p.precision == "fp8" else {}),
    )


def run(params: GemmParams, ctx: RunContext) -> Iterator[Result]:
    yield from run_kernel(params, ctx, build_case, MATMUL_PRECISIONS, shape_reason=low_precision_reason)
