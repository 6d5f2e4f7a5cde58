"""CUDA-only timing pieces, kept small because no GPU is available to test them here.

Follows ``triton.testing.do_bench``: one pair of CUDA events per sample recorded on
the current stream, an L2-sized buffer zeroed between samples so each call starts
with a cold cache, and a single synchronisation after the last sample so that no
host round-trip sits inside the timed region.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch

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
    return start.elapsed_time(end) / 1e3 / calls


def time_with_events(
    fn: Callable[[], object], device: "torch.device", reps: int, flush: "torch.Tensor | None", calls: int = 1
) -> list[float]:
    """Seconds per call of ``reps`` samples, each ``calls`` back-to-back calls between one pair of CUDA events.

    Cold mode (``flush``) times one call per sample, each after the L2 is zeroed outside the events; hot
    mode groups calls so that a kernel of a few microseconds is not one launch gap per event pair.
    """
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda.synchronize(device)
    for i in range(reps):
        if flush is not None:
            flush.zero_()  # outside the events: the flush is not timed
        starts[i].record()
        for _ in range(calls):
            fn()
        ends[i].record()
    torch.cuda.synchronize(device)
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
    return start.elapsed_time(end) / 1e3 / calls


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
