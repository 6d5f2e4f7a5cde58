"""What the host CPU says it is (``/proc/cpuinfo``): its model, the ISA flags that matter to deep-learning
kernels, and which precisions it only emulates. The cpu device kind and the precision rules read these;
:mod:`accelbench.system.cpu` builds its peak estimate on them.
"""

from __future__ import annotations

import functools
import platform
import re

#: ISA extensions that change what a deep-learning kernel can reach.
_INTERESTING_FLAGS = re.compile(
    r"^(sse4_2|avx|avx2|fma|f16c|avx_vnni|avx512.*|amx.*|asimd|asimddp|asimdhp|bf16|i8mm|sve\d?|sme\d?)$"
)


@functools.lru_cache(maxsize=1)
def cpuinfo() -> dict[str, str]:
    """The first processor block of ``/proc/cpuinfo`` (empty where there is none)."""
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
    info = cpuinfo()
    return info.get("model name") or info.get("Model") or platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    info = cpuinfo()
    raw = (info.get("flags") or info.get("Features") or "").split()
    return sorted({f for f in raw if _INTERESTING_FLAGS.match(f)})


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
