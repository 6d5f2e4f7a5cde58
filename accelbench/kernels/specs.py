"""Parameters of the kernel benchmarks; torch-free so that suites and the CLI parse instantly."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.devices.precision import check_precision
from accelbench.params import TimingParams, positive


@dataclass(frozen=True)
class GemmParams(TimingParams):
    """C[batch, m, n] = A[batch, m, k] @ B[batch, k, n]; batch 1 is a plain matrix multiply."""

    m: int = 1024
    n: int = 1024
    k: int = 1024
    batch: int = 1
    precision: str = "fp32"
    check: bool = True

    def validate(self) -> None:
        super().validate()
        for name in ("m", "n", "k", "batch"):
            positive(f"--{name}", getattr(self, name))
        check_precision(self.precision)
