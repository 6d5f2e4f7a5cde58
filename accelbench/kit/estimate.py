"""The words a family's cost model is written in, below the families so each keeps its model beside its run: the
machine asked about (:class:`Target`, made by :mod:`accelbench.suite.estimate`), its fixed costs (:class:`Costs`)
and the parts a model's seconds add up (:func:`summed`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, TypeVar

from accelbench.devices.precision import peak_key

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Costs:
    """The fixed costs of one class of device (a CPU, an accelerator), in seconds."""

    #: a worker process's start: fork from the warm worker server, open the device
    process_start: float
    #: a fresh interpreter under torchrun (allreduce's ranks, a multi-process training run): Python, torch, device
    interpreter_start: float
    #: a kernel's inputs made and checked once against its fp64 reference
    kernel_setup: float
    #: a model built, moved to the device and its optimizer made
    model_build: float
    #: a language model's weights drawn on the device at full size (8B parameters: 16 GB in bf16)
    llm_build: float
    #: the least a training step lasts, whatever its FLOPs: launching its kernels from Python
    step_floor: float
    #: the least a language model's decode step lasts: transformers' continuous batching, eager, from Python
    decode_floor: float
    #: a vision model's step (training or serving) in PyTorch eager, as a share of the device's peak at its
    #: precision: in a 16-bit or TF32 precision (tensor cores), and in FP32 (an accelerator's plain FP32 units,
    #: whose lower peak a convolution fills far better)
    vision_efficiency: float
    vision_fp32_efficiency: float

    def vision(self, precision: str) -> float:
        """The vision efficiency of ``precision``'s arithmetic."""
        return self.vision_fp32_efficiency if peak_key(precision) == "fp32" else self.vision_efficiency


class Target(Protocol):
    """What the entries run on, as a cost model reads it: the device, how many of its kind, its costs and peaks."""

    @property
    def device(self) -> "torch.device": ...
    @property
    def devices(self) -> int: ...
    @property
    def accelerator(self) -> bool: ...
    @property
    def costs(self) -> Costs: ...
    def flops(self, precision: str) -> float | None:
        """FLOP/s at ``precision``'s peak, None where none is known."""
        ...

    def bandwidth(self) -> float | None:
        """Bytes/s of memory bandwidth, None where none is known."""
        ...


P = TypeVar("P")
#: a benchmark's cost model: its parameters and the target, to the seconds and how they add up
Model = Callable[[P, Target], tuple[float, str]]


def short(seconds: float) -> str:
    """Seconds as a plan prints them: two figures under 10 s, whole seconds above."""
    return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"


def summed(parts: list[tuple[str, float]]) -> tuple[float, str]:
    """The parts' seconds added up, and how ("build 3 s + probe 0.1 s"; a part of no time left out)."""
    return sum(s for _, s in parts), " + ".join(f"{name} {short(s)}" for name, s in parts if s > 0) or "no work"
