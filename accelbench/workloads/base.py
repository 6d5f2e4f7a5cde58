"""The workload contract: what accelbench needs to train (or serve) a model on synthetic data.

A workload builds the model for a ``scale`` (``"full"``, the published configuration, or ``"tiny"``, a CPU step in
well under a second), makes a synthetic batch on the device (so the input pipeline is not what is measured) and
computes the loss; its :class:`ModelInfo` says what it is without building anything. A user's own model is one
such class (docs/train.md, Models). ``default_batch`` is keyed by a kind's ``batch_class``, ``"gpu"`` or
``"cpu"``; a ``"cuda"`` key, its first name, reads as ``"gpu"``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelbench.devices.kind import kind_of

if TYPE_CHECKING:
    import torch

SCALES = ("full", "tiny")
#: the device classes published per-device batch sizes are given for (a device kind's ``batch_class``)
BATCH_CLASSES = ("gpu", "cpu")
#: keys a batch table had before device classes, read as the class they meant (the GPU's was keyed "cuda")
OLD_BATCH_KEYS = {"cuda": "gpu"}


def by_batch_class(table: dict[str, int]) -> dict[str, int]:
    """``table`` keyed by device class: an old key read as its class, unless the class is given too."""
    return {OLD_BATCH_KEYS.get(k, k): v for k, v in table.items() if OLD_BATCH_KEYS.get(k) not in table}


def batch_class(device: "torch.device | str") -> str:
    """The class a device's published batch size is given for: a class as named ("gpu", "cpu"), else the
    class of the device's kind (a ``torch.device`` or its type name: "cuda", "xpu" are "gpu")."""
    if isinstance(device, str) and device in BATCH_CLASSES:
        return device

    return kind_of(device).batch_class


@dataclass(frozen=True)
class ModelInfo:
    name: str
    domain: str
    sample_unit: str
    input_shape: str
    #: published per-device batch size by device class ("gpu", "cpu"; see :func:`batch_class`)
    default_batch: dict[str, int] = field(default_factory=lambda: {"gpu": 64, "cpu": 16})
    #: whether inputs are N x C x H x W images (so --channels-last applies)
    image_input: bool = False
    source: str = ""
    description: str = ""
    #: how it is served: "samples" (a batch in, outputs out) or "tokens" (a prompt in, tokens streamed out)
    serving: str = "samples"

    def __post_init__(self) -> None:
        object.__setattr__(self, "default_batch", by_batch_class(self.default_batch))

    def batch_for(self, device: "torch.device | str") -> int:
        """The published batch for ``device`` (a device, its type name, or a class), the GPU's where its class
        has none, else 32."""
        return self.default_batch.get(batch_class(device), self.default_batch.get("gpu", 32))


class Workload(ABC):
    """One trainable model on synthetic data; subclasses set ``info`` and the three methods."""

    info: ModelInfo

    @abstractmethod
    def build(self, scale: str) -> "torch.nn.Module":
        """The model, randomly initialised (nothing is downloaded)."""

    @abstractmethod
    def synthetic_batch(self, batch_size: int, device: "torch.device", scale: str) -> Any:
        """Inputs and targets for one step, created directly on ``device``."""

    @abstractmethod
    def loss(self, model: "torch.nn.Module", batch: Any) -> "torch.Tensor":
        """The training objective of one batch (a scalar)."""
