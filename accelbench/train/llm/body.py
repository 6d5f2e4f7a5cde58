"""One rank's decoder training: the same code on one device (in-process) and on each of torchrun's ranks.

A step is one optimizer step: ``--grad-accum`` micro-batches, each loss divided by their number, gradients
synchronised on the last only, then fused AdamW where the device has it; each rank draws its own synthetic tokens.
The timing is :func:`accelbench.train.loop.run_windows`'; over several ranks a window is the slowest rank's."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from accelbench.devices.kind import kind_of
from accelbench.devices.precision import set_numeric_mode
from accelbench.kit.step import TrainStep, fused_kwargs
from accelbench.train import loop
from accelbench.train.llm import model as llm_model
from accelbench.train.llm.specs import micro_batch, seq_len_of, sharding_of

if TYPE_CHECKING:
    import torch


@dataclass
class LLMTrainer:
    """The model, its optimizer and this rank's micro-batches; ``step`` is one optimizer step."""

    model: Any
    train_step: TrainStep
    micro: list[Any]
    device: "torch.device"
    sync: Callable[[bool], Any]
    pipeline: None = None
    window_waits: list[float] = field(default_factory=list)
    stopped: str | None = None

    def step(self) -> "torch.Tensor":
        return self.train_step.accumulate([functools.partial(self.loss, b) for b in self.micro], self.sync)

    def loss(self, tokens: "torch.Tensor") -> "torch.Tensor":
        """One micro-batch's loss: each token of its sequences predicted from the ones before it."""
        loss: torch.Tensor = self.model(input_ids=tokens, labels=tokens).loss
        return loss


def gradient_sync(model: Any, strategy: str) -> Callable[[bool], Any]:
    """The switch that lets only the last micro-batch's backward synchronise gradients across the ranks."""
    if strategy == "fsdp":

        @contextlib.contextmanager
        def fsdp(last: bool) -> Any:
            model.set_requires_gradient_sync(last)
            yield

        return fsdp
    if strategy == "ddp":
        return lambda last: contextlib.nullcontext() if last else model.no_sync()
    return lambda last: contextlib.nullcontext()


def make_trainer(
    params: Any, config: Any, device: "torch.device", rank: int, world: int
) -> tuple[LLMTrainer, dict[str, Any]]:
    """Build, shard and initialise the model on this rank, its optimizer and its synthetic micro-batches."""
    import torch

    model = llm_model.prepare(params, config, device, seed=0)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-5, **fused_kwargs(device))
    step = TrainStep(optimizer, device, llm_model.step_precision(params.precision))
    gen = torch.Generator(device="cpu").manual_seed(1000 + rank)  # every rank its own tokens
    shape = (micro_batch(params), seq_len_of(params))
    micro = [torch.randint(0, config.vocab_size, shape, generator=gen).to(device) for _ in range(params.grad_accum)]
    trainer = LLMTrainer(model, step, micro, device, gradient_sync(model, sharding_of(params)))
    return trainer, llm_model.layout(model, params, world)


def train(params: Any, device: "torch.device", rank: int = 0, world: int = 1, progress: Any = None) -> dict[str, Any]:
    """Train on this rank and report what it measured: per-window seconds, memory, the final loss, the layout.

    Out of memory is reported (``oom``), not raised, so the caller makes it a record with what to change.
    """
    set_numeric_mode(device, params.precision)
    config = llm_model.config_for(params)
    report: dict[str, Any] = {}
    try:
        with loop.PeakMemory(device) as mem:
            trainer, report["layout"] = make_trainer(params, config, device, rank, world)
            if params.compile:
                trainer.model = loop.compiled(trainer.model, params)
            tokens = micro_batch(params) * seq_len_of(params) * params.grad_accum * world
            measurement, loss = loop.run_windows(
                trainer,
                params,
                progress or (lambda step, sec: None),
            )
    except Exception as exc:
        if not loop.is_oom(exc):
            raise
        return {"oom": str(exc).splitlines()[0][:200], "layout": report.get("layout")}
    kind = kind_of(device)
    reserved = kind.peak_reserved_memory(device)
    return report | {
        "samples": list(measurement.samples),
        "clock": measurement.clock,
        "meta": measurement.meta,
        "tokens_per_step": tokens,
        "loss": loss,
        "peak_memory_bytes": mem.peak,
        "peak_reserved_bytes": reserved,
        "memory_method": mem.method,
        "config": {k: getattr(config, k, None) for k in ("hidden_size", "num_hidden_layers", "vocab_size")},
    }
