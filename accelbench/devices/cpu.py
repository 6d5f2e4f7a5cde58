"""The host CPU as a device kind: synchronous, no device memory statistics, gloo between ranks; its energy is
RAPL's (``system/rapl.py``), read by the meter for every window, so it has no device reader."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.devices.base import DeviceKind
from accelbench.devices.host import cpu_model

if TYPE_CHECKING:
    import torch


class CpuKind(DeviceKind):
    name = "cpu"
    torch_type = "cpu"

    def count(self) -> int:
        return 1

    def label(self, device: "torch.device") -> str:
        return cpu_model()

    # unsupported: the base class's rules (no tf32; int8 and fp8 GEMMs run through torch's CPU kernels, whose
    # emulation is judged apart by devices/host.py)


KIND = CpuKind()
