"""CPU facts and an estimate of the CPU's peak FLOP rate.

CPU vendors publish no single peak, so it is estimated from cores x clock x
FLOPs per cycle for the widest vector/matrix unit the CPU advertises, and every
figure derived from it is labelled as an estimate.
"""

from __future__ import annotations

import functools
import platform
import re

import psutil

#: ISA extensions that change what a deep-learning kernel can reach.
_INTERESTING_FLAGS = re.compile(
    r"^(sse4_2|avx|avx2|fma|f16c|avx_vnni|avx512.*|amx.*|asimd|asimddp|asimdhp|bf16|i8mm|sve\d?|sme\d?)$"
)


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    if info:
                        break  # the first processor block is enough
                    continue
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return info


def cpu_model() -> str:
    info = _cpuinfo()
    return info.get("model name") or info.get("Model") or platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    info = _cpuinfo()
    raw = (info.get("flags") or info.get("Features") or "").split()
    return sorted({f for f in raw if _INTERESTING_FLAGS.match(f)})


def cpu_clock_ghz() -> float | None:
    """Maximum clock if the OS knows it, else the current one (VMs often report only that)."""
    try:
        freq = psutil.cpu_freq()
    except (OSError, NotImplementedError):
        freq = None
    if freq is not None and freq.max:
        return freq.max / 1000.0
    if freq is not None and freq.current:
        return freq.current / 1000.0
    mhz = _cpuinfo().get("cpu MHz")
    return float(mhz) / 1000.0 if mhz else None


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


def usable_cores() -> int:
    """The logical CPUs this process may run on (its affinity: a container or taskset may give fewer than the
    machine has), which is what loader workers and thread counts should be sized from."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def flops_per_cycle(precision: str, flags: list[str]) -> tuple[int, str] | None:
    """FLOPs (int8: ops) per cycle per core and the unit assumed, or None when no unit is known.

    Two FMA pipes are assumed where a core may have one: the estimate is an upper bound.
    """
    f = set(flags)
    fp32_avx512 = "avx512f" in f
    if precision == "fp8":
        return None  # no CPU has fp8 arithmetic units; torch emulates it
    if precision == "int8":
        if "amx_int8" in f:
            return 2048, "AMX-INT8 tile unit"
        if "avx512_vnni" in f:
            return 256, "avx512_vnni, 2 units"
        if "avx_vnni" in f:
            return 128, "avx_vnni, 2 units"
        return None
    if precision in ("bf16", "fp16"):
        if f"amx_{precision}" in f:
            return 1024, f"AMX-{precision.upper()} tile unit"
        native = "avx512_bf16" if precision == "bf16" else "avx512_fp16"
        if native in f:
            return 128, f"{native}, 2 FMA units"
    if precision == "fp64":
        if fp32_avx512:
            return 32, "avx512f, 2 FMA units"
        if "fma" in f:
            return 16, "avx2+fma, 2 FMA units"
        return 4, "scalar/sse"
    if fp32_avx512:
        return 64, "avx512f, 2 FMA units"
    if "avx2" in f and "fma" in f:
        return 32, "avx2+fma, 2 FMA units"
    if "asimd" in f:
        return 16, "NEON, 2 FMA units"
    if "avx" in f:
        return 16, "avx"
    return 8, "sse"


#: The CPU flags that mean a precision has arithmetic units (x86 and Arm spellings); without one, torch
#: emulates the precision through fp32 conversions, many times slower than fp32 itself.
_NATIVE = {
    "bf16": ("amx_bf16", "avx512_bf16", "bf16"),
    "fp16": ("amx_fp16", "avx512_fp16", "asimdhp"),
    "int8": ("amx_int8", "avx512_vnni", "avx_vnni", "asimddp", "i8mm"),
}


def emulated_reason(precision: str, flags: list[str]) -> str | None:
    """Why this CPU would only emulate ``precision`` (None where it has the units, or for fp32)."""
    if precision == "fp8":
        return "no CPU has fp8 arithmetic: torch emulates it (a 1024^3 GEMM takes a minute)"
    native = _NATIVE.get(precision)
    if native is None or set(native) & set(flags):
        return None
    units = " or ".join(native[:2])
    return f"this CPU has no {precision} arithmetic ({units}): torch emulates it, many times slower than fp32"


def estimated_peak_tflops(precision: str, cores: int) -> tuple[float, str] | None:
    """(peak TFLOPS, how it was estimated) for ``cores`` cores, or None without a clock.

    The clock is the higher of the reported one and one core's timed clock (``system.clock``): a boosting
    core runs above the base clock a VM reports, and a peak below what kernels reach says nothing.
    """
    from accelbench.system.clock import timed_clock_ghz

    reported, timed = cpu_clock_ghz(), timed_clock_ghz()
    if not reported and not timed:
        return None
    found = flops_per_cycle(precision, cpu_flags())
    if found is None:
        return None
    if timed and (not reported or timed > reported):
        ghz = timed
        clock = f"{ghz:.2f} GHz timed (dependent-add chain" + (f"; {reported:.2f} reported)" if reported else ")")
    else:
        ghz = reported or 0.0
        clock = f"{ghz:.2f} GHz reported" + (f" (timed {timed:.2f})" if timed else "")
    per_cycle, unit = found
    tflops = cores * ghz * 1e9 * per_cycle / 1e12
    return tflops, f"estimate: {cores} cores x {clock} x {per_cycle} FLOP/cycle ({unit})"
