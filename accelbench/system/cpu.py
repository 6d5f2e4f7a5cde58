"""CPU facts and an estimate of the CPU's peak FLOP rate (the model and flags are :mod:`accelbench.devices.host`'s).

CPU vendors publish no single peak, so it is estimated from cores x clock x
FLOPs per cycle for the widest vector/matrix unit the CPU advertises, and every
figure derived from it is labelled as an estimate.
"""

from __future__ import annotations

import csv
import functools
import os
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psutil

from accelbench.devices import host
from accelbench.system import clock


def cpu_clock_ghz() -> float | None:
    """Maximum clock if the OS knows it, else the current one (VMs often report only that)."""
    try:
        freq = psutil.cpu_freq()
    except (OSError, NotImplementedError):
        freq = None
    if freq is not None and freq.max:
        return float(freq.max) / 1000.0
    if freq is not None and freq.current:
        return float(freq.current) / 1000.0
    mhz = host.cpuinfo().get("cpu MHz")
    return float(mhz) / 1000.0 if mhz else None


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


def usable_cores() -> int:
    """The logical CPUs this process may run on (its affinity: a container or taskset may give fewer than the
    machine has), which is what loader workers and thread counts should be sized from."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(frozen=True)
class CpuId:
    """What the CPU says it is (``/proc/cpuinfo``): the facts its FMA width is read from."""

    vendor: str = ""
    family: int | None = None
    model: int | None = None
    name: str = ""


def cpu_identity(info: dict[str, str] | None = None) -> CpuId:
    """Vendor, family, model and name from ``/proc/cpuinfo`` (or ``info``, a parsed first processor block)."""
    info = host.cpuinfo() if info is None else info

    def number(key: str) -> int | None:
        try:
            return int(info.get(key, ""), 0)
        except ValueError:
            return None

    return CpuId(info.get("vendor_id", ""), number("cpu family"), number("model"), info.get("model name", ""))


@dataclass(frozen=True)
class _Core:
    uarch: str
    units: int
    bits: int
    source: str


def _ranges(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split():
        lo, _, hi = part.partition("-")
        out.append((int(lo, 16), int(hi or lo, 16)))
    return out


@functools.lru_cache(maxsize=1)
def _fma_table() -> tuple[dict[str, str], ...]:
    path = resources.files("accelbench.system") / "data" / "cpu_fma.csv"
    with path.open(encoding="utf-8") as f:
        return tuple(csv.DictReader(f))


def core_of(cpu: CpuId | None, flags: list[str]) -> _Core | None:
    """The FMA units of this CPU's cores from the table (``system/data/cpu_fma.csv``), or None where the
    vendor, family and model (and, for Skylake server, the SKU's name) are not in it."""
    if cpu is None or cpu.family is None or cpu.model is None:
        return None
    for row in _fma_table():
        if row["vendor"] != cpu.vendor or int(row["family"], 16) != cpu.family:
            continue
        if not any(lo <= cpu.model <= hi for lo, hi in _ranges(row["models"])):
            continue
        if row["flag"] and row["flag"] not in flags:
            continue
        if row["name"] and not re.search(row["name"], cpu.name):
            continue
        return _Core(row["uarch"], int(row["fma_units"]), int(row["fma_bits"]), row["source"])
    return None


def _isa_fp32(f: set[str]) -> tuple[int, str]:
    """fp32 FLOP/cycle the widest ISA allows with two FMA units of its width: an upper bound for any core."""
    if "avx512f" in f:
        return 64, "avx512f"
    if "avx2" in f and "fma" in f:
        return 32, "avx2+fma"
    if "asimd" in f:
        return 16, "NEON"
    if "avx" in f:
        return 16, "avx (separate add and multiply)"
    return 8, "sse"


def fp32_per_cycle(flags: list[str], cpu: CpuId | None = None) -> tuple[int, str]:
    """fp32 FLOP per cycle per core and how it was derived: the core's FMA units x their width x 2 FLOP per
    lane, capped by what the ISA it advertises can issue, and the rule's source.

    Zen 4 executes a 512-bit FMA as two halves on 256-bit pipes (32 FLOP/cycle, as Zen 3); Zen 5 server and
    desktop cores and Intel server cores with two 512-bit FMA units have 64. A CPU missing from the table is
    given two FMA units of its widest ISA, labelled an upper bound.
    """
    isa, isa_name = _isa_fp32(set(flags))
    core = core_of(cpu, flags)
    if core is None:
        if isa_name in ("avx (separate add and multiply)", "sse"):
            return isa, isa_name
        return isa, f"{isa_name}, 2 FMA units assumed (microarchitecture not in accelbench's table: an upper bound)"
    rate = core.units * core.bits // 16
    if rate > isa:  # a hypervisor hid the wide ISA: the code can only issue what is advertised
        return isa, f"{isa_name}: {core.uarch}'s wider units unused without its ISA"
    units = f"{core.units} FMA unit{'s' if core.units > 1 else ''} x {core.bits} bits"
    return rate, f"{core.uarch}: {units}; {core.source}"


#: Intel's AMX tile unit per core: 1024 BF16/FP16 FLOP and 2048 INT8 ops per cycle (Intel AMX overview)
_AMX = {"bf16": 1024, "fp16": 1024, "int8": 2048}
_AMX_SOURCE = "AMX tile unit, 1024 BF16/FP16 FLOP or 2048 INT8 ops per cycle per core (Intel AMX overview)"


def flops_per_cycle(precision: str, flags: list[str], cpu: CpuId | None = None) -> tuple[int, str] | None:
    """FLOPs (int8: ops) per cycle per core and how they were derived, or None where the CPU has no unit for
    ``precision`` (it only emulates it: no peak is listed for what it cannot compute natively).

    The vector rates follow the fp32 FMA rate of the core (:func:`fp32_per_cycle`): fp64 half of it; bf16
    (avx512_bf16 dot products) and fp16 (avx512_fp16, Arm's asimdhp) twice, two products per 32-bit lane;
    int8 (VNNI) four times, four products per lane.
    """
    f = set(flags)
    if precision == "fp8":
        return None  # no CPU has fp8 arithmetic units; torch emulates it
    if precision in _AMX and f"amx_{precision}" in f:
        return _AMX[precision], _AMX_SOURCE
    fp32, how = fp32_per_cycle(flags, cpu)
    if precision == "fp32":
        return fp32, how
    if precision == "fp64":
        return fp32 // 2, f"half the fp32 rate: {how}"
    arm = "asimd" in f
    native = {
        "bf16": None if arm else ("avx512_bf16", 2),  # Arm's BFMMLA rate differs by core: no figure claimed
        "fp16": ("asimdhp", 2) if arm else ("avx512_fp16", 2),
        "int8": None if arm else ("avx512_vnni", 4) if "avx512_vnni" in f else ("avx_vnni", 4),
    }.get(precision)
    if native is None or native[0] not in f:
        return None
    flag, factor = native
    return fp32 * factor, f"{flag}, {factor}x the fp32 rate: {how}"


def estimated_peak_tflops(precision: str, cores: int) -> tuple[float, str] | None:
    """(peak TFLOPS, how it was estimated) for ``cores`` cores, or None without a clock.

    The clock is the higher of the reported one and one core's timed clock (``system.clock``): a boosting
    core runs above the base clock a VM reports, and a peak below what kernels reach says nothing. The words
    say which clock the peak rests on and how it was found, so a reader can check it.
    """
    reported, timed = cpu_clock_ghz(), clock.timed_clock()
    if not reported and not timed.ghz:
        return None
    found = flops_per_cycle(precision, host.cpu_flags(), cpu_identity())
    if found is None:
        return None
    if timed.ghz and (not reported or timed.ghz > reported):
        ghz = timed.ghz
        how = f"{ghz:.2f} GHz ({timed.how}" + (f"; {reported:.2f} GHz reported)" if reported else ")")
    else:
        ghz = reported or 0.0
        how = f"{ghz:.2f} GHz reported ({timed.how})"
    per_cycle, unit = found
    tflops = cores * ghz * 1e9 * per_cycle / 1e12
    return tflops, f"estimate: {cores} cores x {how} x {per_cycle} FLOP/cycle ({unit})"


_SYS_CPU = "/sys/devices/system/cpu"


def caches(root: str = _SYS_CPU) -> list[dict[str, Any]]:
    """The caches of the first CPU (``/sys/devices/system/cpu/cpu0/cache``): level, type, size and how many logical
    CPUs share each, as a system description lists them (empty where the kernel does not say).

    cpu0's caches stand for every core's: a machine whose cores differ (big.LITTLE) says so in its own words."""
    found: list[dict[str, Any]] = []
    base = os.path.join(root, "cpu0", "cache")
    try:
        names = sorted(n for n in os.listdir(base) if n.startswith("index"))
    except OSError:
        return []
    for name in names:
        entry = _cache_entry(os.path.join(base, name))
        if entry is not None:
            found.append(entry)
    return found


def _cache_entry(path: str) -> dict[str, Any] | None:
    def read(leaf: str) -> str:
        try:
            with open(os.path.join(path, leaf), encoding="utf-8") as f:
                return f.read().strip()
        except OSError:
            return ""

    level, size = read("level"), _size_bytes(read("size"))
    if not level.isdigit() or size is None:
        return None
    shared = _cpu_list_len(read("shared_cpu_list"))
    return {"level": int(level), "type": read("type") or "Unified", "size_bytes": size, "shared_cpus": shared}


def _size_bytes(text: str) -> int | None:
    """``32K``, ``1024K``, ``32M`` (sysfs' spelling) in bytes."""
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text.strip().upper())
    if m is None:
        return None
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]


def _cpu_list_len(text: str) -> int | None:
    """How many CPUs a sysfs CPU list (``0-3,8``) names."""
    count = 0
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        count += int(hi or lo) - int(lo) + 1
    return count or None


def sockets(root: str = _SYS_CPU) -> int | None:
    """How many CPU packages (sockets) the machine has: the distinct ``topology/physical_package_id`` of its CPUs,
    or None where the kernel does not say (a system description counts processors per node, not cores)."""
    packages: set[str] = set()
    try:
        cpus = [n for n in os.listdir(root) if re.fullmatch(r"cpu\d+", n)]
    except OSError:
        return None
    for name in cpus:
        try:
            with open(os.path.join(root, name, "topology", "physical_package_id"), encoding="utf-8") as f:
                packages.add(f.read().strip())
        except OSError:
            continue
    packages.discard("-1")  # some Arm kernels have no package id
    return len(packages) or None
