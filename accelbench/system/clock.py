"""The clock a CPU core actually runs at, timed, for a peak that holds.

A peak from the reported base clock is beaten by any core that boosts, and a figure above 100% of a peak only
says the denominator is wrong. Where the kernel exposes no maximum frequency (virtual machines usually do not),
two chains of dependent instructions on different units are timed (register adds, one cycle each; ``imul``,
three); where they agree they are the clock, else there is none and the caller says so. Why these instructions,
and how a neighbour is kept out, is in docs/system.md (The CPU clock)."""

from __future__ import annotations

import ctypes
import functools
import mmap
import platform
import struct
import time
from dataclasses import dataclass
from typing import Callable

#: instructions per loop iteration; the loop's own dec/jnz run beside the chain, not in it
_UNROLL = 100
_ADD_ITERATIONS = 50_000  # 5M adds: about 1.3 ms a run at 4 GHz, short enough to fit between preemptions
_IMUL_ITERATIONS = 17_000  # 1.7M imuls x 3 cycles: about the same time
#: cycles one instruction of each chain waits for the one before
ADD_CYCLES = 1
IMUL_CYCLES = 3
_IMUL_FACTOR = 3  # rdx of the imul chain: an odd factor keeps every product non-zero, so the result checks the run
_REPEATS = 25  # runs of each chain a round, interleaved
_ROUNDS = 3  # rounds before the chains are called disagreeing (a busy host may spoil one)
#: how far the two chains' clocks may differ and still be called one clock
AGREEMENT = 0.10
#: a timed clock outside this range means the chains did not measure what they should: discarded
PLAUSIBLE_GHZ = (0.4, 7.0)


@dataclass(frozen=True)
class TimedClock:
    """A core's clock in GHz (None where none holds here) and how it was found, or why there is none."""

    ghz: float | None
    how: str


@dataclass(frozen=True)
class _Chain:
    name: str
    code: bytes
    iterations: int
    cycles: int  # per instruction of the chain

    def expected(self) -> int:
        """What the function returns after running all its iterations (checks that it ran them)."""
        done = self.iterations * _UNROLL
        return done if self.name == "add" else pow(_IMUL_FACTOR, done, 2**64)


def _loop(setup: bytes, instruction: bytes) -> bytes:
    """``uint64 f(uint64 n)`` (System V ABI): ``setup``, then n iterations of 100 ``instruction``; returns rax."""
    head = bytes.fromhex("4889f9") + setup  # mov rcx, rdi
    body = instruction * _UNROLL
    tail = bytes.fromhex("48ffc9")  # dec rcx
    jnz_end = len(head) + len(body) + len(tail) + 6
    jnz = b"\x0f\x85" + struct.pack("<i", len(head) - jnz_end)  # jnz back to the first instruction
    return head + body + tail + jnz + b"\xc3"  # ret


def add_chain() -> _Chain:
    """Dependent ``add rax, rdx`` with rdx = 1: the renamer knows no register's value, so none is folded."""
    setup = bytes.fromhex("31c0") + bytes.fromhex("ba01000000")  # xor eax, eax; mov edx, 1
    return _Chain("add", _loop(setup, bytes.fromhex("4801d0")), _ADD_ITERATIONS, ADD_CYCLES)  # add rax, rdx


def imul_chain() -> _Chain:
    """Dependent ``imul rax, rdx`` with rax = 1, rdx = 3: 3 cycles each, in the multiplier."""
    setup = bytes.fromhex("b801000000") + bytes([0xBA, _IMUL_FACTOR, 0, 0, 0])  # mov eax, 1; mov edx, 3
    return _Chain("imul", _loop(setup, bytes.fromhex("480fafc2")), _IMUL_ITERATIONS, IMUL_CYCLES)  # imul rax, rdx


def run_chains(chains: list[_Chain], repeats: int) -> list[float] | None:
    """Each chain's fastest run of ``repeats``, run interleaved, in GHz (instructions x cycles each / second),
    or None where the code could not run here or returned a wrong result."""
    try:
        buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, AttributeError, ValueError):  # W^X policies, or no mmap protections on this OS
        return None
    functions: list[Callable[[int], int]] = []
    try:
        offset = 0
        base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        for chain in chains:
            buf.seek(offset)
            buf.write(chain.code)
            functions.append(ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(base + offset))
            offset += (len(chain.code) + 63) // 64 * 64
        for chain, fn in zip(chains, functions, strict=True):  # warm: page in, branch predictor trained, clock up
            fn(chain.iterations)
        best = [float("inf")] * len(chains)
        for _ in range(repeats):
            for i, (chain, fn) in enumerate(zip(chains, functions, strict=True)):
                t0 = time.perf_counter()
                done = fn(chain.iterations)
                best[i] = min(best[i], time.perf_counter() - t0)
                if done != chain.expected():
                    return None
        return [c.iterations * _UNROLL * c.cycles / t / 1e9 for c, t in zip(chains, best, strict=True)]
    finally:
        functions.clear()
        buf.close()


def judge(add_ghz: float, imul_ghz: float) -> TimedClock:
    """One clock from the two chains' figures, or None with why: they must agree within :data:`AGREEMENT` and
    lie in :data:`PLAUSIBLE_GHZ`. The higher is kept: a peak must not fall below what the core can do."""
    lo, hi = PLAUSIBLE_GHZ
    figures = f"register-add chain {add_ghz:.2f} GHz, imul chain {imul_ghz:.2f} GHz"
    if abs(add_ghz - imul_ghz) > AGREEMENT * min(add_ghz, imul_ghz):
        return TimedClock(None, f"not timed: the chains disagree ({figures})")
    ghz = max(add_ghz, imul_ghz)
    if not lo <= ghz <= hi:
        return TimedClock(None, f"not timed: {ghz:.2f} GHz is outside {lo}-{hi} GHz ({figures})")
    return TimedClock(ghz, f"timed: {figures}, agree")


def measure_clock(rounds: int = _ROUNDS, repeats: int = _REPEATS) -> TimedClock:
    """Time the clock now (uncached): up to ``rounds`` rounds until the two chains agree."""
    if platform.machine().lower() not in ("x86_64", "amd64") or platform.system() != "Linux":
        return TimedClock(None, f"not timed: the chains are x86-64 Linux code ({platform.machine()} here)")
    verdict = TimedClock(None, "not timed")
    for _ in range(rounds):
        found = run_chains([add_chain(), imul_chain()], repeats)
        if found is None:
            return TimedClock(None, "not timed: executable memory refused, or the chains returned a wrong result")
        verdict = judge(*found)
        if verdict.ghz is not None:
            return verdict
    return verdict


@functools.lru_cache(maxsize=1)
def timed_clock() -> TimedClock:
    """One core's running clock, timed once a process (:func:`measure_clock`)."""
    return measure_clock()


def timed_clock_ghz() -> float | None:
    """One core's running clock in GHz, or None where no timed clock holds here."""
    return timed_clock().ghz
