"""AMD GPUs as a device kind: a HIP build of torch answers ``torch.cuda`` for them, and says so in
``torch.version.hip``; precisions follow the GPU's gfx architecture, collectives go through RCCL (which torch
names ``nccl``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.devices.amdsmi_reader import AmdSmiReader
from accelbench.devices.cuda import CudaKind
from accelbench.devices.precision import no_tf32_reason, tf32_math

if TYPE_CHECKING:
    import torch

    from accelbench.devices.readers import DeviceReader

#: gfx architectures by what their matrix cores compute (AMD CDNA ISA guides): bf16 from CDNA 1 (MI100, gfx908),
#: fp8 from CDNA 3 (MI300X/MI325X, gfx942; MI355X, gfx950)
BF16_ARCHS = ("gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1200", "gfx1201")
FP8_ARCHS = ("gfx940", "gfx941", "gfx942", "gfx950", "gfx1200", "gfx1201")


class RocmKind(CudaKind):
    name = "rocm"
    vendor = "AMD"
    jpeg_decode = False  # torchvision's device decoding is nvJPEG
    onnx_provider = None  # ONNX Runtime's ROCm/MIGraphX providers are not wired; its CUDA one is NVIDIA's
    onnx_tensorrt = False

    def claims(self, device: "torch.device") -> bool:
        import torch

        return device.type == "cuda" and bool(torch.version.hip)

    def unavailable(self) -> str | None:
        import torch

        if not torch.version.hip:
            return "this torch is not a HIP (ROCm) build"
        if not torch.cuda.is_available():
            return "torch (HIP build) sees no AMD GPU"
        return None

    def arch(self, device: "torch.device") -> str:
        """The gfx architecture, without its feature flags ("gfx942:sramecc+:xnack-" -> "gfx942")."""
        import torch

        return str(getattr(torch.cuda.get_device_properties(device), "gcnArchName", "")).split(":")[0]

    def properties(self, device: "torch.device") -> dict[str, Any]:
        return super().properties(device) | {"arch": self.arch(device)}

    def unsupported(self, device: "torch.device", precision: str) -> str | None:
        arch = self.arch(device)
        if tf32_math(precision):
            return no_tf32_reason(f"{self.label(device)} ({arch})")
        if precision == "bf16" and arch not in BF16_ARCHS:
            return f"bf16 matrix arithmetic needs CDNA (gfx908+) or RDNA 3+; {self.label(device)} is {arch}"
        if precision == "fp8" and arch not in FP8_ARCHS:
            return f"fp8 needs CDNA 3 (gfx942, MI300) or later; {self.label(device)} is {arch}"
        return None

    # monitored: torch's index, as for NVIDIA GPUs; the reader maps it to amdsmi's handle by PCI address

    def reader(self) -> "DeviceReader | None":
        """amdsmi (NVML does not see AMD GPUs), one per process: it initialises the library once."""
        if self._reader is None:
            self._reader = AmdSmiReader()
        return self._reader

    def clock_name(self, device: "torch.device") -> str:
        return "hip_event"

    def memory_method(self) -> str | None:
        return "torch.cuda.max_memory_allocated (HIP)"


KIND = RocmKind()
