"""The training step and its timing: what ``accelbench train`` measures.

One step is what a training loop does: zero the gradients, compute the loss
under autocast, backpropagate (through GradScaler for fp16), and step the
optimizer. Timing follows tf_cnn_benchmarks: warm-up steps first, then windows of
``display_every`` steps; each window gives one sample of seconds per step. On
CUDA the window is bracketed by events and the host synchronises only at the
window's end, never inside a step.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

from accelbench.measure.stats import Measurement

if TYPE_CHECKING:
    import torch

    from accelbench.train.specs import TrainParams
    from accelbench.workloads.base import Workload

AUTOCAST_DTYPE = {"amp_fp16": "float16", "amp_bf16": "bfloat16"}
#: The precision whose peak a training run is compared with.
PEAK_PRECISION = {"fp32": "fp32", "tf32": "tf32", "amp_fp16": "fp16", "amp_bf16": "bf16"}


@dataclass
class Trainer:
    """A model, its optimizer and one synthetic batch, ready to step."""

    workload: "Workload"
    model: "torch.nn.Module"
    optimizer: "torch.optim.Optimizer"
    scaler: Any
    batch: Any
    device: "torch.device"
    precision: str

    def autocast(self) -> Any:
        import torch

        if self.precision in AUTOCAST_DTYPE:
            return torch.autocast(self.device.type, dtype=getattr(torch, AUTOCAST_DTYPE[self.precision]))
        return contextlib.nullcontext()

    def step(self) -> "torch.Tensor":
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.workload.loss(self.model, self.batch)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss.detach()


def make_trainer(
    workload: "Workload", model: "torch.nn.Module", params: "TrainParams", device: "torch.device", batch_size: int
) -> Trainer:
    import torch

    batch = workload.synthetic_batch(batch_size, device, params.scale)
    if params.channels_last:
        batch = tuple(t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t for t in batch)
    # Fused optimizers on CUDA: one kernel per step, and GradScaler hands them its inf check on the
    # device instead of reading it back to the host (no synchronisation inside a step).
    fused = {"fused": True} if device.type == "cuda" else {}
    if params.optimizer == "adamw":
        optimizer: torch.optim.Optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **fused)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, **fused)
    scaler = torch.amp.GradScaler(device.type) if params.precision == "amp_fp16" else None
    return Trainer(workload, model, optimizer, scaler, batch, device, params.precision)


def prepare_model(workload: "Workload", params: "TrainParams", device: "torch.device") -> "torch.nn.Module":
    import torch

    model = workload.build(params.scale).to(device)
    if params.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    return model


def flops_per_sample(trainer: Trainer, samples: int) -> float | None:
    """Forward + backward FLOPs of one step / samples, counted by torch's FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with FlopCounterMode(display=False) as counter:
            trainer.step()
    except Exception:  # an op the counter cannot follow: report no FLOPs rather than a wrong number
        return None
    total = counter.get_total_flops()
    return total / samples if total else None


def run_windows(
    trainer: Trainer, params: "TrainParams", report: Callable[[int, float], None]
) -> tuple[Measurement, float]:
    """Warm up, then time ``num_batches`` steps in windows; returns per-step seconds and the last loss."""
    from accelbench.devices import synchronize

    device = trainer.device
    loss = None
    for _ in range(params.warmup):
        loss = trainer.step()
    synchronize(device)
    samples: list[float] = []
    windows = params.num_batches // params.display_every
    for w in range(windows):
        if device.type == "cuda":
            samples.append(_cuda_window(trainer, params.display_every))
        else:
            t0 = time.perf_counter_ns()
            for _ in range(params.display_every):
                loss = trainer.step()
            synchronize(device)
            samples.append((time.perf_counter_ns() - t0) / 1e9 / params.display_every)
        report((w + 1) * params.display_every, samples[-1])
    loss = trainer.step() if loss is None else loss
    return Measurement(tuple(samples), clock="cuda_event" if device.type == "cuda" else "perf_counter_ns"), float(loss)


def _cuda_window(trainer: Trainer, steps: int) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        trainer.step()
    end.record()
    end.synchronize()  # the only host synchronisation: at the window's end
    return start.elapsed_time(end) / 1e3 / steps


class PeakMemory:
    """Peak memory over a block: the CUDA allocator's peak, or on a CPU the process's resident set.

    With ``sample=True`` (the auto-batch trials) a thread polls the RSS every 5 ms
    to see each trial's own peak; a measured run must not share its CPU with a
    polling thread, so there the kernel's lifetime peak (``ru_maxrss``) is read at
    the end instead.
    """

    def __init__(self, device: "torch.device", sample: bool = False) -> None:
        self.device = device
        self.sample = sample
        self.peak = 0
        self.start = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda":
            import torch

            torch.cuda.reset_peak_memory_stats(self.device)
            self.start = torch.cuda.memory_allocated(self.device)
            return self
        import psutil

        proc = psutil.Process()
        self.peak = self.start = proc.memory_info().rss
        if self.sample:

            def poll() -> None:
                while not self._stop.wait(0.005):
                    self.peak = max(self.peak, proc.memory_info().rss)

            self._thread = threading.Thread(target=poll, daemon=True)
            self._thread.start()
        return self

    @property
    def growth(self) -> int:
        """How much the block added at its peak (robust to memory an allocator keeps from before)."""
        return max(0, self.peak - self.start)

    def __exit__(self, *exc: object) -> None:
        if self.device.type == "cuda":
            import torch

            self.peak = torch.cuda.max_memory_allocated(self.device)
        elif self._thread is not None:
            self._stop.set()
            self._thread.join()
        else:
            import resource
            import sys

            scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
            self.peak = max(self.peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale)


def is_oom(exc: BaseException) -> bool:
    name = type(exc).__name__
    return name == "OutOfMemoryError" or isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()


@contextlib.contextmanager
def freed(device: "torch.device") -> Iterator[None]:
    """Return cached memory after a trial, so the next batch size starts clean."""
    try:
        yield
    finally:
        import gc

        gc.collect()
        if device.type == "cuda":
            import torch

            torch.cuda.empty_cache()
