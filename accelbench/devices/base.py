"""The protocol every device kind answers, with a host device's answers as the defaults (see ``kind.py``)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from accelbench.devices.table import no_tf32_reason, tf32_math

if TYPE_CHECKING:
    import torch

    from accelbench.devices.readers import DeviceReader


class DeviceKind:
    """A kind of device, answered as a host device would be; subclasses override what their hardware adds."""

    #: the kind's name in records and messages ("cuda", "rocm", "xpu", ...)
    name: ClassVar[str] = "cpu"
    #: ``torch.device.type`` of its devices
    torch_type: ClassVar[str] = "cpu"
    #: who makes it, for the record and ``accelbench system``
    vendor: ClassVar[str] = ""
    #: names a user may type for it, each with what to say ("tpu" on XLA): an unknown --device points here
    aliases: ClassVar[dict[str, str]] = {}
    #: a discrete accelerator (its own memory, a queue to wait for), as opposed to the host
    accelerator: ClassVar[bool] = False
    #: collective backend its ranks join (torch.distributed)
    dist_backend: ClassVar[str] = "gloo"
    #: why one run cannot take several ranks of this kind ("": it can)
    no_ranks: ClassVar[str] = ""
    #: the device-class key of published per-device batch sizes ("gpu" or "cpu")
    batch_class: ClassVar[str] = "cpu"
    #: optimizers' fused implementations exist for it (``torch.optim.AdamW(fused=True)``)
    fused_optimizer: ClassVar[bool] = False
    #: host memory pinned for copies to it pays off
    pin_memory: ClassVar[bool] = False
    #: it records operations into a graph that runs when cut (XLA): the timer cuts after every call
    lazy: ClassVar[bool] = False
    #: it can capture and replay a graph of kernels (CUDA graphs)
    graphs: ClassVar[bool] = False
    #: torchvision decodes JPEG on it (``decode_jpeg(..., device=...)``: nvJPEG on NVIDIA GPUs)
    jpeg_decode: ClassVar[bool] = False
    #: ONNX Runtime's execution provider for its devices (None: none is wired; a host kind's sessions run on
    #: ``CPUExecutionProvider``)
    onnx_provider: ClassVar[str | None] = None
    #: ONNX Runtime's TensorRT provider runs on its devices (an INT8 figure on it is only taken from TensorRT)
    onnx_tensorrt: ClassVar[bool] = False

    # -- presence -------------------------------------------------------------------------------------------

    def claims(self, device: "torch.device") -> bool:
        """Whether a device of type ``torch_type`` is this kind (two kinds may share one type)."""
        return device.type == self.torch_type

    def unavailable(self) -> str | None:
        """Why no device of this kind can be used here (no hardware, a torch built without it), or None."""
        return None

    def count(self) -> int:
        """Devices of this kind on this machine."""
        return 1

    def auto(self) -> bool:
        """Whether ``--device auto`` may pick this kind here (an accelerator with a device; a kind whose device is
        a test stand-in for the host, XLA on ``PJRT_DEVICE=CPU``, says no)."""
        return self.accelerator and self.unavailable() is None and self.count() > 0

    def resolve(self, index: int | None) -> "torch.device":
        """The ``torch.device`` a user's name means, its index filled in for an indexed kind."""
        import torch

        return torch.device(self.torch_type) if index is None else torch.device(self.torch_type, index)

    def make_current(self, device: "torch.device") -> None:
        """Make ``device`` the process's current device of its kind (allocations without an index land there)."""

    def label(self, device: "torch.device") -> str:
        """A human name: the accelerator's marketing name, the CPU's model."""
        return str(device)

    def total_memory(self, device: "torch.device") -> int | None:
        """The device's own memory in bytes, where it reports one (the host's is the machine's)."""
        return None

    def lost_context(self, text: str) -> str | None:
        """The line of an error's ``text`` that says this kind's device context is lost for good (every later call
        in the process fails with it), or None: a host device has no such error."""
        return None

    def free_memory(self, device: "torch.device") -> int | None:
        """The device memory free now in bytes, where the kind can read it: what a model about to be built can
        have, less what other processes and this one's own allocations hold."""
        return None

    def properties(self, device: "torch.device") -> dict[str, Any]:
        """What the system profile records of one device (its name and memory; a kind adds its own facts)."""
        return {"name": self.label(device), "memory_bytes": self.total_memory(device)}

    def record_name(self, device: "torch.device | None" = None) -> str:
        """The device as a record names it, and as ``--device`` accepts it again: torch's name where it is the
        kind's ("cuda:0", "cpu"), else the kind's ("rocm:0" for an AMD GPU that torch calls cuda:0)."""
        index = getattr(device, "index", None)
        if device is not None and self.name == device.type:
            return str(device)
        return self.name if index is None else f"{self.name}:{index}"

    # -- time -------------------------------------------------------------------------------------------------

    def no_grad(self) -> AbstractContextManager[Any]:
        """The no-autograd mode inference runs under: ``torch.inference_mode`` (no version counters), or
        ``torch.no_grad`` where the kind's tensors cannot be inference tensors (XLA's)."""
        import torch

        return torch.inference_mode()

    def end_step(self, device: "torch.device") -> None:
        """Mark the end of one step of work: a lazy device (XLA) cuts its graph here, so every step is one graph
        compiled once, not the warm-up traced whole; an eager device needs nothing."""

    def synchronize(self, device: "torch.device") -> None:
        """Wait for the work queued on ``device``; the host runs synchronously."""

    def numeric_mode(self, device: "torch.device", precision: str) -> dict[str, Any]:
        """Set this kind's own math switches so that ``precision`` computes at the precision it names; returns
        what it set, for the record (nothing on a kind whose defaults already do)."""
        return {}

    def compilations(self) -> tuple[int, float] | None:
        """(graphs compiled so far in this process, seconds spent compiling them) on a kind that compiles every
        new graph before it runs (XLA), so a measurement can count compilation apart from the work; None on an
        eager kind."""
        return None

    #: whether the kind times with device events (:meth:`time_events`; else the host clock around a
    #: synchronisation), and flushes its cache between cold samples (:meth:`flush_buffer`)
    event_timing: ClassVar[bool] = False

    def flush_buffer(self, device: "torch.device") -> "torch.Tensor | None":
        """A buffer larger than the device's last-level cache, zeroed between cold samples (None: no flush)."""
        return None

    def estimate_call_seconds(self, fn: Callable[[], object], device: "torch.device", flush: Any) -> float:
        """Rough seconds per call (the flush included), timed on the device, to size warm-up and repetitions."""
        raise NotImplementedError(f"{self.name} has no event timing")

    def time_events(
        self, fn: Callable[[], object], device: "torch.device", reps: int, flush: Any, calls: int = 1
    ) -> list[float]:
        """Seconds per call of ``reps`` samples, each ``calls`` calls between a pair of device events."""
        raise NotImplementedError(f"{self.name} has no event timing")

    def time_graph_replay(
        self, fn: Callable[[], object], device: "torch.device", reps: int, flush: Any, calls: int = 1
    ) -> list[float]:
        """Per-call seconds of ``fn`` captured ``calls`` times in one graph, replayed ``reps`` times (``graphs``)."""
        raise NotImplementedError(f"{self.name} cannot capture graphs")

    def cache_bytes(self, device: "torch.device") -> int | None:
        """The device's last-level cache, where it reports one (a memory-bandwidth test must exceed it)."""
        return None

    def time_burst(
        self, fn: Callable[[], object], device: "torch.device", calls: int, clock: Callable[[], int]
    ) -> float:
        """Seconds per call over ``calls`` back-to-back calls, the device waited for once, at the end."""
        t0 = clock()
        for _ in range(calls):
            fn()
        self.synchronize(device)
        return (clock() - t0) / 1e9 / calls

    def clock_name(self, device: "torch.device") -> str:
        """How :meth:`time_burst` read the time, for the record."""
        return "perf_counter_ns" if not self.accelerator else f"perf_counter_ns+{self.name}_synchronize"

    # -- memory ---------------------------------------------------------------------------------------------

    def reset_peak_memory(self, device: "torch.device") -> int | None:
        """Start counting peak memory; the bytes allocated now, or None where the device keeps no statistics."""
        return None

    def peak_memory(self, device: "torch.device") -> int | None:
        """Peak bytes allocated since :meth:`reset_peak_memory`, or None."""
        return None

    def memory_method(self) -> str | None:
        """What :meth:`peak_memory` reads, for the record."""
        return None

    def peak_reserved_memory(self, device: "torch.device") -> int | None:
        """Peak bytes the allocator reserved from the device since :meth:`reset_peak_memory` (allocated plus its
        cache: what another process could not use), or None where the device keeps no such figure."""
        return None

    def float8_training_reason(self, device: "torch.device") -> str | None:
        """Why float8 training (torchao's float8 linears, through ``torch._scaled_mm``) cannot run on ``device``,
        or None."""
        return (
            f"float8 training (torchao) runs on NVIDIA GPUs of compute capability 8.9+, not on the {self.name} device"
        )

    def release_memory(self, device: "torch.device") -> None:
        """Hand cached, unused memory back (between benchmarks in one process)."""

    # -- serving --------------------------------------------------------------------------------------------

    def serving_stream(self, device: "torch.device") -> Any | None:
        """A serving worker's own queue on ``device`` (so waiting for it never waits for another worker's
        work), or None where the device has one queue (the host runs the batch in the calling thread)."""
        return None

    def serving_batch(self, device: "torch.device", stream: Any) -> AbstractContextManager[None]:
        """Run one batch on ``stream`` (from :meth:`serving_stream`): wait for the caller's queue first (the
        batch was copied there), and at the end for the batch itself, so the answer is complete when the block
        exits normally. The host needs nothing."""
        return nullcontext()

    def prepare_thread(self, device: "torch.device") -> None:
        """Ready a thread that is not the one torch was first used in (an engine's scheduler) to run work on
        ``device``, compiled work included. The host needs nothing."""

    # -- kernels: which library path runs, or why it cannot here ---------------------------------------------

    def attention_backend(self, q: "torch.Tensor", causal: bool) -> str:
        """The fused scaled-dot-product-attention kernel torch can use for ``q`` (self-attention), for the
        record; a kind without a way to ask names what torch runs there."""
        return "cpu (flash-attention CPU kernel or math)"

    def int8_gemm_reason(self, m: int, k: int, n: int) -> str | None:
        """Why ``torch._int_mm`` cannot multiply an m x k by a k x n int8 matrix on this kind, or None."""
        return None

    def semi_structured_reason(self, device: "torch.device") -> str | None:
        """Why 2:4 semi-structured sparsity (``torch.sparse.to_sparse_semi_structured``) cannot run on
        ``device``, or None."""
        return "2:4 semi-structured sparsity runs on NVIDIA GPUs (Ampere+) only"

    # -- precision, clocks, energy ----------------------------------------------------------------------------

    def unsupported(self, device: "torch.device", precision: str) -> str | None:
        """Why ``device`` cannot run ``precision`` at all (its arithmetic is absent), or None."""
        if tf32_math(precision):
            return no_tf32_reason(f"the {self.name} device")
        if precision in ("int8", "fp8") and self.accelerator:
            return f"{precision} GEMM is only measured on CUDA and CPU, not on {self.name}"
        return None

    def monitored(self, device: "torch.device") -> int | None:
        """The index its :meth:`reader` knows this device by, or None (not monitored)."""
        return None

    def reader(self) -> "DeviceReader | None":
        """Who reads its devices' energy, power, clocks and throttling (``devices/readers.py``: NVML, amdsmi),
        or None where nothing does (the host's energy is RAPL's, read apart)."""
        return None

    def facts(self) -> dict[str, Any]:
        """What ``accelbench system`` shows of this kind: its devices, or why there are none."""
        why = self.unavailable()
        return {"kind": self.name, "vendor": self.vendor, "devices": 0 if why else self.count(), "unavailable": why}
