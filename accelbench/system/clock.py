"""The clock a CPU core actually runs at, timed, for a peak that holds.

A peak from the reported base clock is beaten by any core that boosts (this development host reports
2.45 GHz and its GEMMs reach 117% of the peak computed from it), and a figure above 100% of a peak tells
the reader only that the denominator is wrong. Where the kernel exposes no maximum frequency (virtual
machines usually do not), the clock is timed: a chain of dependent integer adds, each waiting for the one
before, retires one add per cycle on every x86-64 core since the first, so adds per second is cycles per
second. The chain is a few hundred bytes of machine code run through ctypes (no compiler needed); where
executable memory is refused, or on another architecture, there is no timed clock and the caller says so.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import platform
import struct
import time

#: adds per loop iteration; the loop's own dec/jnz run beside the chain, not in it
_UNROLL = 100
_ITERATIONS = 400_000  # 40M adds: about 15 ms a run at 3 GHz
#: a timed clock outside this range means the chain did not measure what it should: discarded
_PLAUSIBLE_GHZ = (0.4, 7.0)


def _x86_64_chain() -> bytes:
    """``uint64 f(uint64 n)``: n iterations of 100 dependent ``add rax, 1``; returns rax (System V ABI)."""
    head = bytes.fromhex("4889f9") + bytes.fromhex("31c0")  # mov rcx, rdi; xor eax, eax
    body = bytes.fromhex("4883c001") * _UNROLL  # add rax, 1
    tail = bytes.fromhex("48ffc9")  # dec rcx
    jnz_end = len(head) + len(body) + len(tail) + 6
    jnz = b"\x0f\x85" + struct.pack("<i", len(head) - jnz_end)  # jnz back to the first add
    return head + body + tail + jnz + b"\xc3"  # ret


def _run_chain(code: bytes, iterations: int, repeats: int) -> float | None:
    """The fastest of ``repeats`` runs, in adds per second, or None where the code could not run."""
    try:
        buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, AttributeError, ValueError):  # W^X policies, or no mmap protections on this OS
        return None
    chain = None
    try:
        buf.write(code)
        address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        chain = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(address)
        chain(1000)  # warm: page in, branch predictor trained
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            done = chain(iterations)
            best = min(best, time.perf_counter() - t0)
        if done != iterations * _UNROLL:
            return None
        return iterations * _UNROLL / best
    finally:
        del chain
        buf.close()


@functools.lru_cache(maxsize=1)
def timed_clock_ghz() -> float | None:
    """One core's running clock in GHz from a dependent-add chain, or None where it cannot be timed here."""
    if platform.machine().lower() not in ("x86_64", "amd64") or platform.system() != "Linux":
        return None
    rate = _run_chain(_x86_64_chain(), _ITERATIONS, repeats=7)
    if rate is None:
        return None
    ghz = rate / 1e9
    lo, hi = _PLAUSIBLE_GHZ
    return ghz if lo <= ghz <= hi else None
