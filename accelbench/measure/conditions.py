"""The conditions a measurement ran under.

On a shared host a neighbour can halve a CPU figure, and a GPU that throttles
for heat or power reports a slower kernel than it can run. Recording CPU steal,
other processes' CPU use and the GPU clock beside every number lets a reader tell
a slow machine from a busy one.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import psutil

from accelbench.measure.energy import EnergyMeter

#: Hypervisor steal above this share of CPU time marks a result as contended.
STEAL_THRESHOLD = 0.05
#: Other processes using more than this share of all CPUs mark a result as contended.
OTHER_CPU_THRESHOLD = 0.10
#: Share of the window a power or thermal limit held the GPU's clocks down before a figure is flagged.
THROTTLE_THRESHOLD = 0.01

_BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq")


def _system_busy_and_steal() -> tuple[float, float, float]:
    t = psutil.cpu_times()
    busy = sum(getattr(t, f, 0.0) for f in _BUSY_FIELDS)
    steal = getattr(t, "steal", 0.0)
    total = sum(t._asdict().values()) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    return busy, steal, total


def _own_cpu_seconds() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def cuda_indices(devices: Any) -> list[int]:
    """The CUDA device indices among ``devices`` (torch devices, or anything with ``type`` and ``index``)."""
    return sorted({d.index or 0 for d in devices if getattr(d, "type", None) == "cuda"})


@dataclass
class Conditions:
    """What else was happening on the machine while a measurement ran."""

    threads: int
    cpu_count: int
    wall_seconds: float = 0.0
    steal_fraction: float = 0.0
    other_cpu_fraction: float = 0.0
    gpu: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: the window's energy per domain, measured or why not (measure/energy.py)
    energy: dict[str, Any] = field(default_factory=dict)

    @property
    def contended(self) -> bool:
        return bool(self.warnings)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["contended"] = self.contended
        return d


class ConditionsMonitor:
    """Context manager that samples /proc/stat (via psutil) before and after a measurement, and meters the
    energy of the window on the CPU packages and on ``gpus`` (default: ``gpu_index``)."""

    def __init__(self, threads: int, gpu_index: int | None = None, gpus: Sequence[int] | None = None) -> None:
        self.conditions = Conditions(threads=threads, cpu_count=os.cpu_count() or 1)
        self._gpu_index = gpu_index
        self._meter = EnergyMeter(list(gpus) if gpus is not None else [] if gpu_index is None else [gpu_index])

    def __enter__(self) -> "ConditionsMonitor":
        self._meter.__enter__()
        self._violations0: dict[str, int] = {}
        if self._gpu_index is not None:
            from accelbench.system.nvidia import violation_ns

            self._violations0 = violation_ns(self._gpu_index)
        self._t0 = time.perf_counter()
        self._busy0, self._steal0, self._total0 = _system_busy_and_steal()
        self._own0 = _own_cpu_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        c = self.conditions
        c.wall_seconds = time.perf_counter() - self._t0
        self._meter.__exit__(*exc)
        if self._meter.reading is not None:
            c.energy = self._meter.reading.to_dict()
        busy, steal, total = _system_busy_and_steal()
        own = _own_cpu_seconds() - self._own0
        d_total = max(total - self._total0, 1e-9)
        c.steal_fraction = max(0.0, (steal - self._steal0) / d_total)
        capacity = max(c.wall_seconds * c.cpu_count, 1e-9)
        c.other_cpu_fraction = min(1.0, max(0.0, (busy - self._busy0 - own) / capacity))
        if c.steal_fraction > STEAL_THRESHOLD:
            c.warnings.append(f"contended: the hypervisor stole {c.steal_fraction:.0%} of CPU time")
        if c.other_cpu_fraction > OTHER_CPU_THRESHOLD:
            c.warnings.append(f"contended: other processes used {c.other_cpu_fraction:.0%} of the CPUs")
        if self._gpu_index is not None:
            self._gpu_throttling(c)

    def _gpu_throttling(self, c: Conditions) -> None:
        """Throttling during the window from NVML's violation counters; the end snapshot where they are missing."""
        from accelbench.system.nvidia import clocks_and_throttle, violation_ns

        c.gpu = clocks_and_throttle(self._gpu_index)  # type: ignore[arg-type]
        after = violation_ns(self._gpu_index)  # type: ignore[arg-type]
        window_ns = max(c.wall_seconds * 1e9, 1.0)
        shares = {k: min(1.0, max(0, after[k] - v) / window_ns) for k, v in self._violations0.items() if k in after}
        if shares:
            c.gpu["throttled_fraction"] = shares
            for limit, share in shares.items():
                if share > THROTTLE_THRESHOLD:
                    c.warnings.append(f"GPU throttled: the {limit} limit held the clocks down {share:.0%} of the time")
            return
        reasons = c.gpu.get("throttle_reasons") or []
        if reasons:
            c.warnings.append(f"GPU throttled at the end of the measurement: {', '.join(reasons)}")
