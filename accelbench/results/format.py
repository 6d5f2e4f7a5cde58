"""Numbers as a person reads them: 3-4 significant figures, time in the right unit."""

from __future__ import annotations

import math

from accelbench.results.record import Metric, Result


def number(value: float, digits: int = 4) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


def seconds(value: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(value) >= scale or unit == "ns":
            return f"{number(value / scale, 3)} {unit}"
    return f"{value:g} s"


#: units shown one SI step down while the figure is below 0.01 (a tiny CPU kernel: 1.18 MFLOPS, not 0.00000118 TFLOPS)
_SMALLER = {"TFLOPS": "GFLOPS", "GFLOPS": "MFLOPS", "MFLOPS": "kFLOPS", "GB/s": "MB/s", "MB/s": "kB/s"}


def metric(m: Metric) -> str:
    if m.unit == "s":
        return seconds(m.value)
    value, unit = m.value, m.unit
    while 0 < abs(value) < 0.01 and unit in _SMALLER:
        value, unit = value * 1000, _SMALLER[unit]
    return f"{number(value)} {unit}"


def ci_percent(m: Metric) -> str:
    """Half-width of the 95% CI relative to the value: '±1.2%'."""
    if m.ci95 is None or not m.value:
        return ""
    half = (m.ci95[1] - m.ci95[0]) / 2 / abs(m.value)
    return f"±{half:.1%}"


def outcome(r: Result) -> str:
    """The primary figure of an ok record, or the reason it has none."""
    if r.status == "failed":
        return r.error or "failed"
    if r.status == "skipped":
        return r.reason or "skipped"
    m = r.primary
    if m is None:
        return ""
    ci = ci_percent(m)
    return f"{metric(m)} {ci}".strip()


def bytes_(value: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{number(value / scale, 3)} {unit}"
    return f"{value:.0f} B"
