"""Intel GPUs as a device kind, through ``torch.xpu``: its events, memory statistics and the xccl backend."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.devices.base import DeviceKind

if TYPE_CHECKING:
    import torch


def _xpu():  # type: ignore[no-untyped-def]
    import torch

    return getattr(torch, "xpu", None)


class XpuKind(DeviceKind):
    name = "xpu"
    torch_type = "xpu"
    vendor = "Intel"
    accelerator = True
    dist_backend = "xccl"
    batch_class = "gpu"
    pin_memory = True

    def unavailable(self) -> str | None:
        xpu = _xpu()
        if xpu is None or not xpu.is_available():
            return "torch sees no Intel XPU device"
        return None

    def count(self) -> int:
        xpu = _xpu()
        return xpu.device_count() if xpu is not None and xpu.is_available() else 0

    def resolve(self, index: int | None) -> "torch.device":
        import torch

        return torch.device("xpu", _xpu().current_device() if index is None else index)

    def make_current(self, device: "torch.device") -> None:
        _xpu().set_device(device)

    def label(self, device: "torch.device") -> str:
        return str(_xpu().get_device_name(device))

    def total_memory(self, device: "torch.device") -> int | None:
        props = getattr(_xpu(), "get_device_properties", None)
        return int(props(device).total_memory) if props is not None else None

    def synchronize(self, device: "torch.device") -> None:
        _xpu().synchronize(device)

    def reset_peak_memory(self, device: "torch.device") -> int | None:
        xpu = _xpu()
        xpu.reset_peak_memory_stats(device)
        return int(xpu.memory_allocated(device))

    def peak_memory(self, device: "torch.device") -> int | None:
        return int(_xpu().max_memory_allocated(device))

    def memory_method(self) -> str | None:
        return "torch.xpu.max_memory_allocated"

    def release_memory(self, device: "torch.device") -> None:
        _xpu().empty_cache()

    def unsupported(self, device: "torch.device", precision: str) -> str | None:
        if precision == "tf32":
            return f"tf32 is an NVIDIA Tensor Core mode; {self.label(device)} has none"
        if precision == "fp8":
            return f"fp8 GEMM is not measured on {self.label(device)} yet"
        return None


KIND = XpuKind()
