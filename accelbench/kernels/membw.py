"""Device memory bandwidth, STREAM-style: the roof under every memory-bound kernel.

``copy`` (b = a) moves 2 x size bytes per call (read a, write b); ``triad``
(a = b + s * c) moves 3 x size. Arrays are fp32 and much larger than any cache by
default (256 MiB each), so the figure is DRAM/HBM bandwidth, reported in GB/s
(10^9 bytes/s) and as % of the spec table's figure on GPUs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from accelbench.devices import device_label
from accelbench.devices.kind import kind_of
from accelbench.errors import UsageError
from accelbench.kernels.common import KernelCase, kernel_details, relative_error, run_kernel
from accelbench.kernels.specs import MembwParams
from accelbench.kit.context import RunContext
from accelbench.params import parse_size
from accelbench.results.record import Result

if TYPE_CHECKING:
    import torch

#: STREAM's rule for the array size against the last-level cache.
CACHE_MULTIPLE = 4
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

        def fn() -> "torch.Tensor":
            return a.copy_(b)

        def reference() -> "torch.Tensor":
            return b.double()
    else:

        def fn() -> "torch.Tensor":
            return torch.add(b, c, alpha=SCALAR, out=a)

        def reference() -> "torch.Tensor":
            return b.double() + SCALAR * c.double()

    def error() -> float:
        return relative_error(fn(), reference())

    return KernelCase(
        fn=fn,
        precision="fp32",
        flops=None,
        bytes_moved=membw_bytes(p.op, numel * 4),
        error=error,
        throughput="gbps",
        details={"device_name": device_label(device), "bytes_per_array": numel * 4},
    )


def last_level_cache_bytes(device: "torch.device", sysfs: Path = Path("/sys/devices/system/cpu")) -> int | None:
    """All of the device's last-level cache: a GPU's L2, or the sum of the CPU's distinct highest-level caches."""
    kind = kind_of(device)
    if kind.accelerator:
        return kind.cache_bytes(device)
    caches: dict[tuple[int, str], int] = {}  # (level, the CPUs sharing it) -> bytes: each cache counted once
    for index in sysfs.glob("cpu[0-9]*/cache/index[0-9]*"):
        try:
            level = int((index / "level").read_text())
            size = parse_size((index / "size").read_text().strip())
            shared = (index / "shared_cpu_list").read_text().strip()
            if (index / "type").read_text().strip() == "Instruction":
                continue
        except (OSError, ValueError, UsageError):
            continue
        caches[(level, shared)] = size
    if not caches:
        return None
    top = max(level for level, _ in caches)
    return sum(size for (level, _), size in caches.items() if level == top)


def run(params: MembwParams, ctx: RunContext) -> Iterator[Result]:
    """STREAM's rule: each array at least 4x the last-level cache, or the figure is (partly) cache bandwidth."""
    import torch

    for result in run_kernel(params, ctx, build_case, ("fp32",)):
        llc = last_level_cache_bytes(torch.device(result.params["device"])) if result.status == "ok" else None
        if llc:
            kernel_details(result)["last_level_cache_bytes"] = llc
            if parse_size(params.size) < CACHE_MULTIPLE * llc:
                result.concern(
                    "cache-resident",
                    f"cache-resident: each array ({params.size}) is under {CACHE_MULTIPLE}x the "
                    f"{llc / 2**20:.0f} MiB last-level cache, so this is partly cache bandwidth, not memory's; "
                    f"use --size {CACHE_MULTIPLE * llc // 2**20}M or more",
                )
        yield result
