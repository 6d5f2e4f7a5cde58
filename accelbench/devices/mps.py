"""Apple GPUs as a device kind, through ``torch.mps``: one device, synchronised by ``torch.mps.synchronize``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.devices.base import DeviceKind

if TYPE_CHECKING:
    import torch


class MpsKind(DeviceKind):
    name = "mps"
    torch_type = "mps"
    vendor = "Apple"
    accelerator = True
    batch_class = "gpu"

    def unavailable(self) -> str | None:
        import torch

        return None if torch.backends.mps.is_available() else "torch sees no Apple GPU (MPS)"

    def count(self) -> int:
        return 0 if self.unavailable() else 1

    def synchronize(self, device: "torch.device") -> None:
        import torch

        torch.mps.synchronize()

    # unsupported: the base class's rules (no tf32; int8 and fp8 GEMMs are not measured on an accelerator
    # other than CUDA)


KIND = MpsKind()
