"""The training step and its timing: what ``accelbench train`` measures.

One step is the kit's :class:`~accelbench.kit.step.TrainStep` (the same step time
to accuracy takes). Timing follows tf_cnn_benchmarks: warm-up steps first, then
windows of ``display_every`` steps; each window gives one sample of seconds per
step. A window is one burst: on CUDA bracketed by events, and the host
synchronises only at the window's end, never inside a step.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from accelbench.devices import synchronize
from accelbench.devices.kind import kind_of
from accelbench.devices.precision import PRECISIONS, model_dtype
from accelbench.errors import StoppedEarly
from accelbench.kit.step import TrainStep, fused_kwargs
from accelbench.measure.compiles import CompileCount, compile_meta
from accelbench.measure.stats import Measurement
from accelbench.measure.timer import clock_name, time_burst
from accelbench.params import compile_mode_arg
from accelbench.train.data import Pipeline, open_pipeline

if TYPE_CHECKING:
    import torch

    from accelbench.train.specs import TrainParams
    from accelbench.workloads.base import Workload

#: The precision whose peak a training run is compared with (the precision table's peak key).
PEAK_PRECISION = {name: p.peak for name, p in PRECISIONS.items()}


class Steps(Protocol):
    """What :func:`run_windows` times: a model's :class:`Trainer` and a decoder's
    (:class:`accelbench.train.llm.body.LLMTrainer`) alike."""

    #: why the measurement ended early, set by :func:`run_windows` (None: it did not)
    stopped: str | None

    @property
    def device(self) -> "torch.device": ...
    @property
    def pipeline(self) -> "Pipeline | None": ...  # real data's input pipeline (None: synthetic batches)
    @property
    def window_waits(self) -> list[float]: ...  # each window's wait for its batches, appended to per window
    def step(self) -> "torch.Tensor": ...


@dataclass
class Trainer:
    """A model, its optimizer and one synthetic batch, ready to step with the kit's training step."""

    workload: "Workload"
    model: "torch.nn.Module"
    train_step: TrainStep
    batch: Any
    device: "torch.device"
    #: real data: where each step takes its next batch (None: the one synthetic batch, every step)
    pipeline: "Pipeline | None" = None
    feed: Callable[[], Any] | None = None
    #: seconds each measured window's steps waited for their batches (real data)
    window_waits: list[float] = field(default_factory=list)
    #: why the measurement ended before ``num_batches`` (the runner's stop), with what it kept; None: it did not
    stopped: str | None = None

    def step(self) -> "torch.Tensor":
        if self.feed is not None:
            self.batch = self.feed()
        return self.train_step(lambda: self.workload.loss(self.model, self.batch))

    def use_real_data(
        self, params: "TrainParams", batch_size: int, workers: int, rank: int = 0, world: int = 1
    ) -> None:
        """Feed every step from ``--data-dir`` through the input pipeline, converted as the synthetic batch is."""
        self.pipeline = open_pipeline(self.workload, params, self.device, batch_size, workers, rank, world)
        self.feed = self.pipeline.feeder(self.device, lambda b: as_model_input(b, params))
        self.batch = self.feed()  # a real batch for the FLOP count


def make_trainer(
    workload: "Workload", model: "torch.nn.Module", params: "TrainParams", device: "torch.device", batch_size: int
) -> Trainer:
    import torch

    batch = as_model_input(workload.synthetic_batch(batch_size, device, params.scale), params)
    fused = fused_kwargs(device)
    if params.optimizer == "adamw":
        optimizer: torch.optim.Optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **fused)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, **fused)
    return Trainer(workload, model, TrainStep(optimizer, device, params.precision), batch, device)


def as_model_input(batch: Any, params: "TrainParams") -> Any:
    """Floating inputs in the model's dtype (labels and token ids stay), 4-D ones in its memory format."""
    import torch

    dtype = model_dtype(params.precision)  # bf16, fp16 convert the model itself (weights, activations, gradients)
    if dtype is not None:
        batch = tuple(t.to(dtype) if t.is_floating_point() else t for t in batch)
    if params.channels_last:
        batch = tuple(t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t for t in batch)
    return batch


def prepare_model(workload: "Workload", params: "TrainParams", device: "torch.device") -> "torch.nn.Module":
    import torch

    model = workload.build(params.scale).to(device)
    dtype = model_dtype(params.precision)
    if dtype is not None:
        model = model.to(dtype)
    if params.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    return model


def compiled(model: "torch.nn.Module", params: "TrainParams") -> Any:
    """torch.compile in the asked mode (the one place both the single-device and the DDP path compile)."""
    import torch

    return torch.compile(model, mode=compile_mode_arg(params.compile_mode))


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


class _Stop(Exception):
    """Raised between two steps when the runner asked to stop: the window in progress is dropped."""


def run_windows(
    trainer: Steps,
    params: "TrainParams",
    report: Callable[[int, float], None],
    stop: Callable[[], str | None] = lambda: None,
) -> tuple[Measurement, float]:
    """Warm up, then time ``num_batches`` steps in windows; returns per-step seconds and the final loss.

    Each window is one burst, so the host waits only at a window's end; the measured steps' losses stay on the device
    and are read once at the end, so a divergence during the measurement is caught too. When ``stop`` gives a reason
    (Ctrl-C, the timeout) the finished windows are kept (``trainer.stopped`` says how many) and the unfinished one
    dropped; with none finished, :class:`StoppedEarly`."""
    device = trainer.device
    kind = kind_of(device)
    compiles = CompileCount(device)
    for _ in range(params.warmup):
        if stop():
            raise StoppedEarly(f"{stop()} during the warm-up: no window was measured")
        loss = trainer.step()  # alive through the cut, as a measured step's is: on XLA a live output is part of the
        kind.end_step(device)  # graph, which is compiled here once, as the windows will run it
        del loss
    synchronize(device)
    warmup_compiles = compiles.since()
    losses: list["torch.Tensor"] = []
    samples: list[float] = []
    window = params.window
    windows = params.num_batches // window

    def step() -> None:
        if stop():
            raise _Stop
        losses.append(trainer.step())

    pipeline = trainer.pipeline
    for w in range(windows):
        waited = pipeline.waited if pipeline else 0.0
        kept = len(losses)
        try:
            samples.append(time_burst(step, device, window))
        except _Stop:
            synchronize(device)
            del losses[kept:]
            if not samples:
                raise StoppedEarly(f"{stop()} before the first window finished: nothing measured") from None
            trainer.stopped = f"{stop()}: {len(samples)} of {windows} windows measured, the figure is theirs"
            break
        if pipeline is not None:
            trainer.window_waits.append(pipeline.waited - waited)
        report((w + 1) * window, samples[-1])
    meta = compile_meta(warmup_compiles, compiles.since())
    m = Measurement(tuple(samples), calls_per_sample=window, clock=clock_name(device), meta=meta)
    return m, _final_loss(losses)


def _final_loss(losses: list["torch.Tensor"]) -> float:
    """The last measured loss, or the first non-finite one if any step diverged (one read of the device)."""
    import torch

    stacked = torch.stack([loss.float().reshape(()) for loss in losses])
    finite = torch.isfinite(stacked)
    return float(stacked[-1]) if bool(finite.all()) else float(stacked[~finite][0])


class PeakMemory:
    """Peak memory over a block: the CUDA allocator's peak, or on a CPU the process's resident set.

    On Linux the kernel's resident high-water mark is reset at the start of the block (``clear_refs``)
    and read at its end (``VmHWM``): exact, free, and the block's own peak, not the process lifetime's
    (which would include earlier trials of the automatic batch search). Elsewhere, with ``sample=True``
    a thread polls the RSS every 5 ms; otherwise the lifetime peak (``ru_maxrss``) is all there is, and
    ``method`` says so.
    """

    def __init__(self, device: "torch.device", sample: bool = False) -> None:
        self.device = device
        self.sample = sample
        self.peak = 0
        self.start = 0
        self.method = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._kind: Any = None  # the device kind whose statistics are read, where it keeps them

    def __enter__(self) -> "PeakMemory":
        kind = kind_of(self.device)
        start = kind.reset_peak_memory(self.device)
        if start is not None:  # the device keeps its own statistics
            self.start, self.method, self._kind = start, kind.memory_method() or kind.name, kind
            return self
        import psutil

        proc = psutil.Process()
        self.peak = self.start = proc.memory_info().rss
        if _reset_rss_peak():
            self.method = "VmHWM after clear_refs"
        elif self.sample:
            self.method = "RSS polled every 5 ms"

            def poll() -> None:
                while not self._stop.wait(0.005):
                    self.peak = max(self.peak, proc.memory_info().rss)

            self._thread = threading.Thread(target=poll, daemon=True)
            self._thread.start()
        else:
            self.method = "ru_maxrss (the process's lifetime peak)"
        return self

    @property
    def growth(self) -> int:
        """How much the block added at its peak (robust to memory an allocator keeps from before)."""
        return max(0, self.peak - self.start)

    def __exit__(self, *exc: object) -> None:
        if self._kind is not None:
            self.peak = self._kind.peak_memory(self.device) or 0
        elif self.method.startswith("VmHWM"):
            self.peak = max(self.peak, _rss_peak())
        elif self._thread is not None:
            self._stop.set()
            self._thread.join()
        else:
            import resource
            import sys

            scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
            self.peak = max(self.peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale)


def _reset_rss_peak() -> bool:
    """Reset the kernel's resident-set high-water mark (Linux >= 4.0); False where it cannot be."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _rss_peak() > 0
    except OSError:
        return False


def _rss_peak() -> int:
    """VmHWM, the resident high-water mark since the last reset, in bytes (0 if unreadable)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


#: How allocators say "out of memory": CUDA's, and the CPU's (``DefaultCPUAllocator: can't allocate memory``).
OOM_SPELLINGS = ("out of memory", "can't allocate memory", "cannot allocate memory", "not enough memory")


def is_oom(exc: BaseException) -> bool:
    name = type(exc).__name__
    text = str(exc).lower()
    return name == "OutOfMemoryError" or isinstance(exc, MemoryError) or any(s in text for s in OOM_SPELLINGS)


@contextlib.contextmanager
def freed(device: "torch.device") -> Iterator[None]:
    """Return cached memory after a trial, so the next batch size starts clean."""
    try:
        yield
    finally:
        import gc

        gc.collect()
        kind_of(device).release_memory(device)
