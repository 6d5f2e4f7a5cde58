"""The host CPU as a device kind: synchronous, no device memory statistics, gloo between ranks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.devices.base import DeviceKind

if TYPE_CHECKING:
    import torch


class CpuKind(DeviceKind):
    name = "cpu"
    torch_type = "cpu"

    def count(self) -> int:
        return 1

    def label(self, device: "torch.device") -> str:
        from accelbench.devices.host import cpu_model

        return cpu_model()

    def unsupported(self, device: "torch.device", precision: str) -> str | None:
        if precision == "tf32":
            return "tf32 is an NVIDIA Tensor Core mode; the cpu device has no tf32"
        return None  # int8 and fp8 GEMMs run through torch's CPU kernels (emulation is judged apart)


KIND = CpuKind()
