"""The accelerator spec table shipped with accelbench, and the peak of any device.

% of peak is only honest when the peak's origin is visible, so every :class:`Peak`
carries its source: a datasheet row for a GPU, an estimate for a CPU.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from accelbench.devices import kind as device_kind
from accelbench.devices.precision import peak_key, tf32_math

if TYPE_CHECKING:
    import torch

PRECISION_COLUMNS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")


@dataclass(frozen=True)
class AcceleratorSpec:
    name: str
    match: str
    peaks: dict[str, float]  # precision -> dense TFLOPS (TOPS for int8)
    mem_gb: float | None
    mem_bw_gbs: float | None
    tdp_w: float | None
    derived: tuple[str, ...]
    source: str
    notes: str

    def matches(self, device_name: str) -> bool:
        return bool(self.match) and re.search(self.match, device_name, re.IGNORECASE) is not None


@dataclass(frozen=True)
class Peak:
    tflops: float
    source: str
    estimated: bool


def _num(text: str) -> float | None:
    text = text.strip()
    return float(text) if text else None


@functools.lru_cache(maxsize=1)
def load_specs() -> tuple[AcceleratorSpec, ...]:
    path = resources.files("accelbench.system") / "data" / "accelerator_specs.csv"
    rows = []
    with path.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            peaks = {p: v for p in PRECISION_COLUMNS if (v := _num(row[p])) is not None}
            rows.append(
                AcceleratorSpec(
                    name=row["name"],
                    match=row["match"],
                    peaks=peaks,
                    mem_gb=_num(row["mem_gb"]),
                    mem_bw_gbs=_num(row["mem_bw_gbs"]),
                    tdp_w=_num(row["tdp_w"]),
                    derived=tuple(row["derived"].split()),
                    source=row["source"],
                    notes=row["notes"],
                )
            )
    return tuple(rows)


def find_spec(device_name: str) -> AcceleratorSpec | None:
    """The row whose pattern matches the name torch reports for the device.

    Patterns are anchored on word boundaries and exclude their variants ("H200" is not "GH200" nor "H200 NVL",
    "B200" not "GB200"): a variant runs at other clocks and power, so the first row that merely contains a
    name would lend it another part's peak. A variant whose figures accelbench lacks has a row with none, so
    it gets no peak rather than a wrong one.
    """
    for spec in load_specs():
        if spec.matches(device_name):
            return spec
    return None


def peak_for(device: "torch.device", precision: str, threads: int | None = None) -> Peak | None:
    """Peak TFLOPS of ``device`` at ``precision`` (its peak key in the precision table), or None when nothing
    trustworthy is known.

    On the CPU the estimate counts the cores actually used (``threads``, capped at
    the physical cores), since a 2-thread run cannot use a 64-core socket's peak.
    """
    kind = device_kind.kind_of(device)
    key = peak_key(precision)  # the column it is judged against (amp_fp16: fp16)
    if kind.accelerator:  # looked up by the name its kind gives it ("NVIDIA H100 80GB HBM3")
        spec = find_spec(kind.label(device))
        if spec is None or key not in spec.peaks:
            return None
        return Peak(spec.peaks[key], f"{spec.name}: {spec.source}", key in spec.derived)
    if not tf32_math(precision):  # a CPU has no TF32 math, so no estimate of it
        from accelbench.system.cpu import estimated_peak_tflops, physical_cores

        cores = physical_cores() if threads is None else max(1, min(threads, physical_cores()))
        est = estimated_peak_tflops(key, cores)
        if est is None:
            return None
        return Peak(est[0], est[1], True)
    return None


def bandwidth_peak_for(device: "torch.device") -> tuple[float, str] | None:
    """(peak memory bandwidth in GB/s, source) from the spec table; CPUs have no trustworthy figure."""
    kind = device_kind.kind_of(device)
    if not kind.accelerator:
        return None
    spec = find_spec(kind.label(device))
    if spec is None or spec.mem_bw_gbs is None:
        return None
    return spec.mem_bw_gbs, f"{spec.name}: {spec.source}"


def no_peak_reason(device_name: str, precision: str) -> str:
    """Why a record on ``device_name`` at ``precision`` has no % of peak: the spec table has no such device, or
    its row holds no figure for the precision (with the row's note, which says why)."""
    key = peak_key(precision)
    spec = find_spec(device_name)
    if spec is None:
        return f"no peak known: {device_name!r} is not in accelbench's spec table"
    if key not in spec.peaks:
        why = f" ({spec.notes})" if not spec.peaks and spec.notes else ""
        return f"no peak known: {spec.name} has no {key} figure in accelbench's spec table{why}"
    return f"no peak known for {precision} on {device_name}"
