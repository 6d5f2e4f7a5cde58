"""Intel GPUs as a device kind, through ``torch.xpu``: its events, memory statistics and the xccl backend
(``ccl`` from Intel's oneCCL bindings before torch 2.8)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from accelbench.devices.base import DeviceKind
from accelbench.devices.cuda import event_times
from accelbench.devices.precision import no_tf32_reason, tf32_math

if TYPE_CHECKING:
    import torch


def _xpu() -> Any:  # ``torch.xpu``, or None in a torch without it
    import torch

    return getattr(torch, "xpu", None)


class XpuKind(DeviceKind):
    name = "xpu"
    torch_type = "xpu"
    vendor = "Intel"
    accelerator = True
    batch_class = "gpu"
    pin_memory = True

    @property
    def dist_backend(self) -> str:  # type: ignore[override]
        """``xccl``, built into torch's XPU builds from torch 2.8 (``torch.distributed.is_xccl_available``
        appears with it); before, Intel's ``oneccl_bindings_for_pytorch`` registers ``ccl`` when imported."""
        import torch.distributed as dist

        if hasattr(dist, "is_xccl_available"):
            return "xccl"
        try:
            import oneccl_bindings_for_pytorch  # noqa: F401 (registers ccl)
        except ImportError:
            pass  # init_process_group then says the backend is unknown, naming it
        return "ccl"

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

    @property
    def event_timing(self) -> bool:  # type: ignore[override]
        """Time with ``torch.xpu.Event`` where this torch has it (2.5+), else the host clock around a wait."""
        xpu = _xpu()
        return xpu is not None and hasattr(xpu, "Event")

    def estimate_call_seconds(self, fn: Callable[[], object], device: "torch.device", flush: Any) -> float:
        return sum(self.time_events(fn, device, 1, flush, calls=5))

    def time_events(
        self, fn: Callable[[], object], device: "torch.device", reps: int, flush: Any, calls: int = 1
    ) -> list[float]:
        """As CUDA's: one pair of events per sample on the current queue, one wait after the last sample."""
        return event_times(_xpu(), fn, device, reps, flush, calls)

    def time_burst(
        self, fn: Callable[[], object], device: "torch.device", calls: int, clock: Callable[[], int]
    ) -> float:
        if not self.event_timing:
            return super().time_burst(fn, device, calls, clock)
        return self.time_events(fn, device, 1, None, calls)[0]

    def clock_name(self, device: "torch.device") -> str:
        return "xpu_event" if self.event_timing else super().clock_name(device)

    def reset_peak_memory(self, device: "torch.device") -> int | None:
        xpu = _xpu()
        xpu.reset_peak_memory_stats(device)
        return int(xpu.memory_allocated(device))

    def peak_memory(self, device: "torch.device") -> int | None:
        return int(_xpu().max_memory_allocated(device))

    def memory_method(self) -> str | None:
        return "torch.xpu.max_memory_allocated"

    def peak_reserved_memory(self, device: "torch.device") -> int | None:
        return int(_xpu().max_memory_reserved(device))

    def release_memory(self, device: "torch.device") -> None:
        _xpu().empty_cache()

    def unsupported(self, device: "torch.device", precision: str) -> str | None:
        if tf32_math(precision):
            return no_tf32_reason(self.label(device))
        if precision == "fp8":
            return f"fp8 GEMM is not measured on {self.label(device)} yet"
        return None


KIND = XpuKind()
