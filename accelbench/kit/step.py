"""One training step, shared by training throughput and time to accuracy.

A step is what a training loop does: zero the gradients, compute the loss under
autocast, backpropagate (through GradScaler for fp16) and step the optimizer. Both
families call the same :class:`TrainStep`, so a precision means the same arithmetic
in a throughput figure and in a time to accuracy.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, TypedDict

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import autocast_dtype

if TYPE_CHECKING:
    import torch


def autocast(device: "torch.device", precision: str) -> Any:
    """torch.autocast for an ``amp_*`` precision (to the precision table's autocast dtype), a no-op otherwise."""
    import torch

    dtype = autocast_dtype(precision)
    if dtype is not None:
        return torch.autocast(device.type, dtype=dtype)
    return contextlib.nullcontext()


class Fused(TypedDict, total=False):
    """The optimizer's keyword for its fused kernel, absent where the device's kind has none."""

    fused: bool


def fused_kwargs(device: "torch.device") -> Fused:
    """Fused optimizers where the device's kind has them: one kernel per step, and GradScaler hands them its inf
    check on the device instead of reading it back to the host (no synchronisation inside a step)."""
    return {"fused": True} if kind_of(device).fused_optimizer else {}


class TrainStep:
    """Zero, forward under autocast, backward (scaled for fp16), step."""

    def __init__(self, optimizer: "torch.optim.Optimizer", device: "torch.device", precision: str) -> None:
        import torch

        self.optimizer = optimizer
        self.device = device
        self.precision = precision
        scaled = autocast_dtype(precision) == torch.float16  # fp16's range needs loss scaling; bf16's does not
        self.scaler = torch.amp.GradScaler(device.type) if scaled else None

    def __call__(self, compute_loss: Callable[[], "torch.Tensor"]) -> "torch.Tensor":
        """Run one step; returns the loss, detached (reading it synchronises, so callers choose when)."""
        return self.accumulate([compute_loss])

    def accumulate(
        self,
        micro_losses: "list[Callable[[], torch.Tensor]]",
        syncing: Callable[[bool], Any] = lambda last: contextlib.nullcontext(),
    ) -> "torch.Tensor":
        """One optimizer step over several micro-batches (gradient accumulation): each loss divided by their
        number and backpropagated; ``syncing(last)`` is the data-parallel wrapper's switch, so that only the last
        backward synchronises gradients across ranks. Returns the step's loss (the micro-batches' mean), detached."""
        self.optimizer.zero_grad(set_to_none=True)
        n = len(micro_losses)
        total = None
        for i, compute in enumerate(micro_losses):
            with syncing(i == n - 1):
                with autocast(self.device, self.precision):
                    loss = compute() / n if n > 1 else compute()
                if self.scaler is not None:
                    self.scaler.scale(loss).backward()
                else:
                    loss.backward()
            total = loss.detach() if total is None else total + loss.detach()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        assert total is not None
        return total
