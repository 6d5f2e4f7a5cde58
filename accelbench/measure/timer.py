"""Time a callable on a device, the one way every accelbench benchmark does it.

Warm-up first (caches, allocator, lazy initialisation, clock ramp-up), then
repetitions until both a minimum count and a minimum time are reached, never
beyond a maximum time. On the CPU each sample is read from a monotonic
nanosecond clock; on CUDA from events recorded on the stream (see
:mod:`accelbench.devices.cuda`), with the L2 cache flushed between samples in
"cold" mode. Other accelerators fall back to wall time with a synchronisation
after each sample, and say so in ``Measurement.clock``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal

from accelbench.devices.kind import DeviceKind, kind_of
from accelbench.measure.compiles import CompileCount, compile_meta
from accelbench.measure.stats import Measurement

if TYPE_CHECKING:
    import torch

CacheMode = Literal["hot", "cold"]


@dataclass(frozen=True)
class TimerConfig:
    """Budgets of one measurement; the defaults suit a kernel taking microseconds to seconds."""

    warmup_seconds: float = 0.1
    min_warmup_calls: int = 2
    min_reps: int = 10
    min_time: float = 0.5
    max_time: float = 10.0
    max_reps: int = 100_000
    cache: CacheMode = "hot"
    #: On host-timed devices, calls shorter than this are grouped so the clock's resolution does not matter.
    min_sample_seconds: float = 20e-6

    def __post_init__(self) -> None:
        if self.min_reps < 1 or self.max_reps < self.min_reps:
            raise ValueError(f"repetitions: need 1 <= min_reps ({self.min_reps}) <= max_reps ({self.max_reps})")
        if self.min_time < 0 or self.max_time <= 0 or self.max_time < self.min_time:
            raise ValueError(
                f"timing budget: need 0 <= min_time ({self.min_time:g}) <= max_time ({self.max_time:g}), max_time > 0"
            )
        if self.warmup_seconds < 0 or self.min_warmup_calls < 0:
            raise ValueError("warm-up must not be negative")
        if self.cache not in ("hot", "cold"):
            raise ValueError(f"cache mode {self.cache!r}: use hot or cold")


class Timer:
    """Measures ``fn`` on ``device``; ``fn`` takes no arguments and enqueues the work.

    ``clock`` (nanoseconds, monotonic) is the host timer's seam: tests pass a fake clock
    that ``fn`` advances, so the stopping rules are checked without sleeping.
    """

    def __init__(
        self,
        fn: Callable[[], object],
        device: "torch.device | str" = "cpu",
        config: TimerConfig | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        import torch

        self.fn = fn
        self.device = torch.device(device)
        self.config = config or TimerConfig()
        self.clock = clock

    def measure(self) -> Measurement:
        kind = kind_of(self.device)
        return self._measure_events(kind) if kind.event_timing else self._measure_host(kind)

    def _measure_host(self, kind: "DeviceKind") -> Measurement:
        cfg, fn, dev = self.config, self.fn, self.device
        if kind.lazy:  # each call its own graph: traced together, calls writing the same output would fold to one
            traced = fn

            def fn() -> object:
                out = traced()
                kind.end_step(dev)
                return out

        clock = self.clock
        sync_each = kind.accelerator  # the queued work must be done before the clock is read
        compiles = CompileCount(dev)
        t_begin = clock()
        warm = 0
        while warm < cfg.min_warmup_calls or (clock() - t_begin) < cfg.warmup_seconds * 1e9:
            fn()
            warm += 1
            if sync_each:
                kind.synchronize(dev)
        warmup_compiles = compiles.since()
        per_call = (clock() - t_begin) / 1e9 / max(warm, 1)
        number = 1
        if per_call < cfg.min_sample_seconds and per_call > 0:
            number = math.ceil(cfg.min_sample_seconds / per_call)
        elif per_call == 0:
            number = 1000

        samples: list[float] = []
        start = clock()
        min_ns, max_ns = cfg.min_time * 1e9, cfg.max_time * 1e9
        while True:
            t0 = clock()
            for _ in range(number):
                fn()
            if sync_each:
                kind.synchronize(dev)
            t1 = clock()
            samples.append((t1 - t0) / 1e9 / number)
            elapsed = t1 - start
            if len(samples) >= cfg.max_reps or elapsed >= max_ns:
                break
            if len(samples) >= cfg.min_reps and elapsed >= min_ns:
                break
        return Measurement(
            samples=tuple(samples),
            calls_per_sample=number,
            warmup_calls=warm,
            total_seconds=(clock() - t_begin) / 1e9,
            clock=kind.clock_name(dev),
            meta={"cache": "hot", "min_reps": cfg.min_reps, "max_time": cfg.max_time}
            | compile_meta(warmup_compiles, compiles.since()),
        )

    def _measure_events(self, kind: "DeviceKind") -> Measurement:
        cfg, fn, dev = self.config, self.fn, self.device
        t_begin = time.perf_counter()
        flush = kind.flush_buffer(dev) if cfg.cache == "cold" else None
        est = max(kind.estimate_call_seconds(fn, dev, flush), 1e-7)
        warm = max(cfg.min_warmup_calls, math.ceil(cfg.warmup_seconds / est))
        for _ in range(warm):
            fn()
        number = calls_per_sample(est, cfg)
        per_sample = est * number
        reps = max(cfg.min_reps, math.ceil(cfg.min_time / per_sample))
        reps = min(reps, cfg.max_reps, max(cfg.min_reps, int(cfg.max_time / per_sample)))
        samples = kind.time_events(fn, dev, reps, flush, number)
        return Measurement(
            samples=tuple(samples),
            calls_per_sample=number,
            warmup_calls=warm + 5,
            total_seconds=time.perf_counter() - t_begin,
            clock=kind.clock_name(dev),
            meta={"cache": cfg.cache, "min_reps": cfg.min_reps, "max_time": cfg.max_time},
        )


def calls_per_sample(seconds_per_call: float, cfg: TimerConfig) -> int:
    """Calls grouped in one CUDA event pair: one in cold mode (each call after a flush); in hot mode
    enough that a sample lasts ``min_sample_seconds``, so a kernel of microseconds is not timed as one
    launch per event pair."""
    if cfg.cache == "cold":
        return 1
    return max(1, math.ceil(cfg.min_sample_seconds / max(seconds_per_call, 1e-9) - 1e-9))


def time_burst(
    fn: Callable[[], object], device: "torch.device", calls: int, clock: Callable[[], int] = time.perf_counter_ns
) -> float:
    """Seconds per call over ``calls`` back-to-back calls, the device waited for once at the end.

    What a training window or a burst of collectives is timed with: device events where the device's kind
    has them, else the host clock around one synchronisation (the queued work must be done before the clock
    is read).
    """
    return kind_of(device).time_burst(fn, device, calls, clock)


def clock_name(device: "torch.device") -> str:
    """How :func:`time_burst` read the time on ``device``, for the record."""
    return kind_of(device).clock_name(device)
