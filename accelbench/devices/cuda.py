"""NVIDIA GPUs as a device kind, and their timing pieces (kept small: no GPU is available to test them here).

The timing follows ``triton.testing.do_bench``: one pair of CUDA events per sample recorded on
the current stream, an L2-sized buffer zeroed between samples so each call starts
with a cold cache, and a single synchronisation after the last sample so that no
host round-trip sits inside the timed region.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator

from accelbench.devices.base import DeviceKind
from accelbench.devices.nvml import NvmlReader

if TYPE_CHECKING:
    import torch

    from accelbench.devices.readers import DeviceReader

#: Larger than the L2 of any current NVIDIA GPU (H100: 50 MB, B200: 126 MB); do_bench uses 256 MB.
L2_FLUSH_BYTES = 256 * 1024 * 1024


def l2_flush_buffer(device: "torch.device") -> "torch.Tensor":
    import torch

    return torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)


def estimate_call_seconds(
    fn: Callable[[], object], device: "torch.device", flush: "torch.Tensor | None", calls: int = 5
) -> float:
    """Rough per-call time (including the flush) used to size warm-up and repetitions."""
    import torch

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    start.record()
    for _ in range(calls):
        if flush is not None:
            flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize(device)
    return float(start.elapsed_time(end)) / 1e3 / calls


def time_with_events(
    fn: Callable[[], object], device: "torch.device", reps: int, flush: "torch.Tensor | None", calls: int = 1
) -> list[float]:
    """Seconds per call of ``reps`` samples, each ``calls`` back-to-back calls between one pair of CUDA events.

    Cold mode (``flush``) times one call per sample, each after the L2 is zeroed outside the events; hot
    mode groups calls so that a kernel of a few microseconds is not one launch gap per event pair.
    """
    import torch

    return event_times(torch.cuda, fn, device, reps, flush, calls)


def event_times(
    api: Any, fn: Callable[[], object], device: "torch.device", reps: int, flush: Any, calls: int = 1
) -> list[float]:
    """The event loop of any torch device module with ``Event`` and ``synchronize`` (``torch.cuda``,
    ``torch.xpu``): one pair of events per sample on the current queue, one wait after the last sample."""
    starts = [api.Event(enable_timing=True) for _ in range(reps)]
    ends = [api.Event(enable_timing=True) for _ in range(reps)]
    api.synchronize(device)
    for i in range(reps):
        if flush is not None:
            flush.zero_()  # outside the events: the flush is not timed
        starts[i].record()
        for _ in range(calls):
            fn()
        ends[i].record()
    api.synchronize(device)
    return [s.elapsed_time(e) / 1e3 / calls for s, e in zip(starts, ends, strict=True)]


def time_burst(fn: Callable[[], object], device: "torch.device", calls: int) -> float:
    """Seconds per call of ``calls`` back-to-back calls between one pair of events on the current stream.

    One host wait, at the end: a burst measures what the device sustains, without a launch gap per call.
    """
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / 1e3 / calls


def time_graph_replay(
    fn: Callable[[], object], device: "torch.device", reps: int, flush: "torch.Tensor | None", calls: int = 1
) -> list[float]:
    """Per-call seconds of ``fn`` captured ``calls`` times in one CUDA graph and replayed ``reps`` times.

    Replay removes the CPU launch overhead that dominates kernels shorter than a few tens of
    microseconds. It is timed in the eager figure's cache mode (``flush`` between replays when cold),
    and in hot mode one replay holds several calls, so the replay's own launch is not what is measured.
    """
    import torch

    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm-up on a side stream, as the CUDA-graph docs require
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return [t / calls for t in time_with_events(graph.replay, device, reps, flush)]


#: CUDA's own words for the errors after which, its documentation says, the process must be terminated and relaunched
#: (the context is corrupt: every later call fails with the same error). torch raises these and harmless errors alike
#: as ``torch.AcceleratorError``, so the words, not the type, decide.
CONTEXT_LOST = (
    "an illegal memory access was encountered",
    "the launch timed out and was terminated",
    "device-side assert triggered",
    "hardware stack error",
    "an illegal instruction was encountered",
    "misaligned address",
    "operation not supported on global/shared address space",
    "invalid program counter",
    "unspecified launch failure",
    "uncorrectable ecc error encountered",
)


class CudaKind(DeviceKind):
    """NVIDIA GPUs through ``torch.cuda``: CUDA events, NCCL, CUDA graphs, compute-capability precisions, NVML."""

    name = "cuda"
    torch_type = "cuda"
    vendor = "NVIDIA"
    accelerator = True
    dist_backend = "nccl"
    batch_class = "gpu"
    fused_optimizer = True
    pin_memory = True
    graphs = True
    jpeg_decode = True
    onnx_provider: ClassVar[str | None] = "CUDAExecutionProvider"  # none on ROCm (RocmKind)
    onnx_tensorrt = True

    def claims(self, device: "torch.device") -> bool:
        import torch

        return device.type == "cuda" and not torch.version.hip

    def unavailable(self) -> str | None:
        import torch

        if torch.version.hip:
            return "this torch is a HIP (ROCm) build: its GPUs are the rocm kind"
        if not torch.cuda.is_available():
            built = torch.version.cuda
            return "CUDA is not available here" + ("" if built else " (this torch is built without CUDA)")
        return None

    def count(self) -> int:
        import torch

        return torch.cuda.device_count()

    def resolve(self, index: int | None) -> "torch.device":
        import torch

        # a bare "cuda" means the current device, with its index (torch.cuda.set_device refuses a bare "cuda")
        return torch.device("cuda", torch.cuda.current_device() if index is None else index)

    def make_current(self, device: "torch.device") -> None:
        import torch

        torch.cuda.set_device(device)

    def label(self, device: "torch.device") -> str:
        import torch

        return torch.cuda.get_device_name(device)

    def total_memory(self, device: "torch.device") -> int | None:
        import torch

        return int(torch.cuda.get_device_properties(device).total_memory)

    def lost_context(self, text: str) -> str | None:
        return next((ln.strip() for ln in text.splitlines() if any(w in ln.lower() for w in CONTEXT_LOST)), None)

    def free_memory(self, device: "torch.device") -> int | None:
        import torch

        return int(torch.cuda.mem_get_info(device)[0])

    def properties(self, device: "torch.device") -> dict[str, Any]:
        import torch

        p = torch.cuda.get_device_properties(device)
        return {
            "name": p.name,
            "memory_bytes": p.total_memory,
            "multiprocessors": p.multi_processor_count,
            "compute_capability": f"{p.major}.{p.minor}",
        }

    def synchronize(self, device: "torch.device") -> None:
        import torch

        torch.cuda.synchronize(device)

    event_timing = True

    def flush_buffer(self, device: "torch.device") -> "torch.Tensor | None":
        return l2_flush_buffer(device)

    def estimate_call_seconds(self, fn: Callable[[], object], device: "torch.device", flush: Any) -> float:
        return estimate_call_seconds(fn, device, flush)

    def time_events(
        self, fn: Callable[[], object], device: "torch.device", reps: int, flush: Any, calls: int = 1
    ) -> list[float]:
        return time_with_events(fn, device, reps, flush, calls)

    def time_graph_replay(
        self, fn: Callable[[], object], device: "torch.device", reps: int, flush: Any, calls: int = 1
    ) -> list[float]:
        return time_graph_replay(fn, device, reps, flush, calls)

    def cache_bytes(self, device: "torch.device") -> int | None:
        import torch

        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)) or None

    def time_burst(
        self, fn: Callable[[], object], device: "torch.device", calls: int, clock: Callable[[], int]
    ) -> float:
        return time_burst(fn, device, calls)

    def clock_name(self, device: "torch.device") -> str:
        return "cuda_event"

    def reset_peak_memory(self, device: "torch.device") -> int | None:
        import torch

        torch.cuda.reset_peak_memory_stats(device)
        return int(torch.cuda.memory_allocated(device))

    def peak_memory(self, device: "torch.device") -> int | None:
        import torch

        return int(torch.cuda.max_memory_allocated(device))

    def memory_method(self) -> str | None:
        return "torch.cuda.max_memory_allocated"

    def peak_reserved_memory(self, device: "torch.device") -> int | None:
        import torch

        return int(torch.cuda.max_memory_reserved(device))

    def float8_training_reason(self, device: "torch.device") -> str | None:
        return self.unsupported(device, "fp8")

    def release_memory(self, device: "torch.device") -> None:
        import torch

        torch.cuda.empty_cache()

    def capability(self, device: "torch.device") -> tuple[int, int]:
        import torch

        major, minor = torch.cuda.get_device_capability(device)
        return major, minor

    def unsupported(self, device: "torch.device", precision: str) -> str | None:
        import torch

        major, minor = self.capability(device)
        cc = f"{self.label(device)} is {major}.{minor}"
        if precision == "tf32" and major < 8:
            return f"tf32 needs compute capability 8.0+ (Ampere); {cc}"
        if precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
            return f"bf16 needs compute capability 8.0+ (Ampere); {cc}"
        if precision == "int8" and (major, minor) < (7, 5):
            return f"int8 Tensor Core GEMM (torch._int_mm) needs compute capability 7.5+ (Turing); {cc}"
        if precision == "fp8" and (major, minor) < (8, 9):
            return f"fp8 (torch._scaled_mm) needs compute capability 8.9+ (Ada, Hopper); {cc}"
        return None

    def monitored(self, device: "torch.device") -> int | None:
        return device.index or 0

    _reader: "DeviceReader | None" = None

    def reader(self) -> "DeviceReader | None":
        """NVML (nvidia-ml-py), one per process."""
        if self._reader is None:
            self._reader = NvmlReader()
        return self._reader

    # -- serving: one CUDA stream per worker ----------------------------------------------------------------

    def serving_stream(self, device: "torch.device") -> Any | None:
        import torch

        return torch.cuda.Stream(device)  # this worker's own: waiting for it never waits for another's work

    def prepare_thread(self, device: "torch.device") -> None:
        """The device made current in the engine's thread (a thread starts on device 0)."""
        import torch

        torch.cuda.set_device(device)

    @contextmanager
    def serving_batch(self, device: "torch.device", stream: Any) -> Iterator[None]:
        import torch

        stream.wait_stream(torch.cuda.current_stream(device))  # the batch was copied on the caller's stream
        with torch.cuda.stream(stream):
            yield
        stream.synchronize()  # the answer is complete before LoadGen hears of it; inputs live until here

    # -- kernels ------------------------------------------------------------------------------------------

    def attention_backend(self, q: "torch.Tensor", causal: bool) -> str:
        from torch.backends.cuda import SDPAParams, can_use_efficient_attention, can_use_flash_attention

        try:
            params = SDPAParams(q, q, q, None, 0.0, causal, False)
            if can_use_flash_attention(params):
                return "flash"
            if can_use_efficient_attention(params):
                return "memory-efficient"
        except (TypeError, RuntimeError):  # the SDPAParams signature differs across versions
            return "unknown"
        return "math"

    def int8_gemm_reason(self, m: int, k: int, n: int) -> str | None:
        if m <= 16 or k % 8 or n % 8:  # cuBLASLt's int8 (IMMA) kernels
            return "int8 GEMM (torch._int_mm) on CUDA needs M > 16 and K, N multiples of 8"
        return None

    def semi_structured_reason(self, device: "torch.device") -> str | None:
        import torch

        if torch.cuda.get_device_capability(device) < (8, 0):
            return "2:4 semi-structured sparsity needs compute capability 8.0+ (Ampere)"
        return None


KIND = CudaKind()
