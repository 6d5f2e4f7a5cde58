"""Numbers as a person reads them: 3-4 significant figures, time in the right unit."""

from __future__ import annotations

import math
import re

from accelbench.results.record import Metric, Result

#: SI prefixes for large counts: 2.51M samples/s reads at a glance, 2,506,332 does not
_LARGE = ((1e12, "T"), (1e9, "G"), (1e6, "M"))


def number(value: float, digits: int = 4) -> str:
    """``value`` to ``digits`` significant figures, thousands separated, millions and up with an SI prefix."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    suffix = ""
    for scale, prefix in _LARGE:
        if abs(value) >= scale * (1 - 0.5 * 10 ** (1 - digits)):
            value, suffix = value / scale, prefix
            break
    magnitude = math.floor(math.log10(abs(value)))
    rounded = round(value, digits - 1 - magnitude)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:,.{decimals}f}{suffix}"


def digits_for(m: Metric) -> int:
    """Significant figures the interval supports: the half-width's leading digit and one more (2 to 4).

    A figure known to ±9.5% shows as 2.51M, not 2,506,332; a tight one keeps four digits.
    """
    if m.ci95 is None or not m.value or not all(math.isfinite(x) for x in m.ci95):
        return 4
    half = abs(m.ci95[1] - m.ci95[0]) / 2
    if half == 0:
        return 4
    digits = math.floor(math.log10(abs(m.value))) - math.floor(math.log10(half)) + 2
    return min(4, max(2, digits))


def seconds(value: float, digits: int = 3) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(value) >= scale or unit == "ns":
            return f"{number(value / scale, digits)} {unit}"
    return f"{value:g} s"


#: units shown one SI step down while the figure is below 0.01 (a tiny CPU kernel: 1.18 MFLOPS, not 0.00000118 TFLOPS)
_SMALLER = {
    "TFLOPS": "GFLOPS",
    "GFLOPS": "MFLOPS",
    "MFLOPS": "kFLOPS",
    "TOPS": "GOPS",
    "GOPS": "MOPS",
    "MOPS": "kOPS",
    "GB/s": "MB/s",
    "MB/s": "kB/s",
}


def metric(m: Metric) -> str:
    """The value with the digits its interval supports, in a unit that keeps it readable."""
    digits = digits_for(m)
    if m.unit == "s":
        return seconds(m.value, min(digits, 3))
    value, unit = m.value, m.unit
    while 0 < abs(value) < 0.01 and unit in _SMALLER:
        value, unit = value * 1000, _SMALLER[unit]
    return f"{number(value, digits)} {unit}"


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
    return f"{percentile(r.primary_metric or '')}{metric(m)} {ci}".strip()


#: a metric named for a percentile of its distribution: ``latency_p90_seconds``, ``query_latency_p99_9_seconds``
_PERCENTILE = re.compile(r"(?:^|_)p(\d+(?:_\d+)?)(?:_|$)")


def percentile(name: str) -> str:
    """'p90 ' for a metric named for its 90th percentile (a bare '20.8 ms' headline says not which), else ''."""
    found = _PERCENTILE.search(name)
    return f"p{found.group(1).replace('_', '.')} " if found else ""


def bytes_(value: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{number(value / scale, 3)} {unit}"
    return f"{value:.0f} B"


def verdict_word(r: Result) -> str:
    """A record's verdict in words: LoadGen's VALID or INVALID, except an accuracy run scored against FP32's own
    answers on synthetic samples, which agrees with FP32 or not and is never MLPerf's accuracy ("" where none)."""
    if r.valid is None:
        return ""
    if r.details.get("accuracy_verified") is False:
        return "agrees with FP32 (not MLPerf's accuracy)" if r.valid else "disagrees with FP32"
    return "VALID" if r.valid else "INVALID"
