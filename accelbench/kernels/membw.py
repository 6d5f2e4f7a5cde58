"""Device memory bandwidth, STREAM-style: the roof under every memory-bound kernel.

``copy`` (b = a) moves 2 x size bytes per call (read a, write b); ``triad``
(a = b + s * c) moves 3 x size. Arrays are fp32 and much larger than any cache by
default (256 MiB each), so the figure is DRAM/HBM bandwidth, reported in GB/s
(10^9 bytes/s) and as % of the spec table's figure on GPUs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from accelbench.devices import device_label
from accelbench.kernels.common import KernelCase, relative_error, run_kernel
from accelbench.kernels.specs import MembwParams
from accelbench.kit.context import RunContext
from accelbench.params import parse_size
from accelbench.results.record import Result

if TYPE_CHECKING:
    import torch

NAME = "kernels/membw"
ARRAYS_MOVED = {"copy": 2, "triad": 3}
SCALAR = 3.0


def membw_bytes(op: str, size: int) -> int:
    return ARRAYS_MOVED[op] * size


def build_case(p: MembwParams, device: "torch.device") -> KernelCase:
    import torch

    size = parse_size(p.size)
    numel = size // 4
    gen = torch.Generator(device="cpu").manual_seed(0)
    a = torch.empty(numel, device=device)
    b = torch.rand(numel, generator=gen).to(device)
    c = torch.rand(numel, generator=gen).to(device)
    if p.op == "copy":

        def fn() -> object:
            return a.copy_(b)

        def reference() -> "torch.Tensor":
            return b.double()
    else:

        def fn() -> object:
            return torch.add(b, c, alpha=SCALAR, out=a)

        def reference() -> "torch.Tensor":
            return b.double() + SCALAR * c.double()

    def error() -> float:
        return relative_error(fn(), reference())  # type: ignore[arg-type]

    return KernelCase(
        fn=fn,
        precision="fp32",
        flops=None,
        bytes_moved=membw_bytes(p.op, numel * 4),
        error=error,
        throughput="gbps",
        details={"device_name": device_label(device), "bytes_per_array": numel * 4},
    )


def run(params: MembwParams, ctx: RunContext) -> Iterator[Result]:
    return run_kernel(NAME, params, ctx, build_case, ("fp32",))
