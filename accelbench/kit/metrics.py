"""Constructors for the figures every family derives from a measurement.

One constructor per kind of figure, so that a time, a rate or a share of a peak
carries the same confidence interval and sample count whichever family made it
(the kernels' and training's ``pct_of_peak`` once differed). A rate's interval is
the time interval inverted: the slowest plausible median gives the lowest rate.
"""

from __future__ import annotations

import math
from typing import Any

from accelbench.measure.compiles import RECOMPILED, compile_warning
from accelbench.measure.stats import MIN_CI_SAMPLES, Measurement
from accelbench.results.details import Peak
from accelbench.results.record import Concern, Metric


def seconds(m: Measurement) -> Metric:
    """The median time per call (or step), with its 95% interval and the derived statistics."""
    return Metric(value=m.median, unit="s", higher_is_better=False, ci95=m.ci95, n=m.n, stats=m.summary())


def rate(work: float, m: Measurement, unit: str, scale: float = 1.0) -> Metric:
    """``work`` per median second (divided by ``scale``: 1e12 for TFLOPS), with the inverted interval."""
    ci = (work / m.ci95[1] / scale, work / m.ci95[0] / scale) if m.ci95 and m.ci95[0] > 0 else None
    return Metric(value=work / m.median / scale, unit=unit, higher_is_better=True, ci95=ci, n=m.n)


def scaled(metric: Metric, factor: float, unit: str | None = None) -> Metric:
    """The same figure times a constant (per device, bus bandwidth, FLOPs per sample): the interval scales too."""
    ci = (metric.ci95[0] * factor, metric.ci95[1] * factor) if metric.ci95 else None
    return Metric(
        value=metric.value * factor,
        unit=unit or metric.unit,
        higher_is_better=metric.higher_is_better,
        ci95=ci,
        n=metric.n,
    )


def inverse(metric: Metric, numerator: float, unit: str) -> Metric:
    """``numerator / metric`` (USD per million images from images per USD): the interval inverts."""
    ci = (numerator / metric.ci95[1], numerator / metric.ci95[0]) if metric.ci95 and metric.ci95[0] > 0 else None
    return Metric(
        value=numerator / metric.value, unit=unit, higher_is_better=not metric.higher_is_better, ci95=ci, n=metric.n
    )


def pct_of_peak(throughput: Metric, peak: float) -> Metric:
    """A throughput as a percentage of a peak of the same unit, interval included."""
    return scaled(throughput, 100.0 / peak, "%")


def figure(value: float, unit: str, *, higher_is_better: bool, n: int | None = None) -> Metric:
    """A figure with no sampling interval (a count, a peak memory, a mean over seeds)."""
    return Metric(value=float(value), unit=unit, higher_is_better=higher_is_better, n=n)


def peak_details(value: float, unit: str, source: str, estimated: bool) -> Peak:
    """Where a peak came from, stored beside ``pct_of_peak`` so a reader can check it."""
    return {"value": value, "unit": unit, "source": source, "estimated": estimated}


def concerns_of(m: Measurement | None, conditions: dict[str, Any]) -> list[Concern]:
    """The record's concerns: the measurement's (noise, too few samples, a recompile, a budget cut short), then what
    the conditions monitor saw (its ``concerns``; a warning of a conditions dict that has none is kind "other")."""
    own: list[Concern] = []
    if m is not None:
        noise = m.noise_warning()
        if noise and m.n < MIN_CI_SAMPLES:
            own.append(Concern("few-samples", noise, {"n": m.n, "needed": MIN_CI_SAMPLES}))
        elif noise:
            own.append(Concern("noisy", noise, {"n": m.n, "spread": _finite(m.spread)}))
        recompiled = compile_warning(m.meta)
        if recompiled:
            c = m.meta.get("compiles") or {}
            data = {"graphs": c.get("window_graphs"), "seconds": _finite(c.get("window_compile_seconds"))}
            own.append(Concern(RECOMPILED, recompiled, data))
        wanted = m.meta.get("min_reps")
        if wanted and m.n < wanted:
            text = (
                f"min-reps not met: {m.n} of {wanted} samples before --max-time {m.meta.get('max_time', 0):g} s; "
                "raise --max-time"
            )
            own.append(Concern("min-reps", text, {"n": m.n, "wanted": wanted}))
    typed = conditions.get("concerns")
    if typed is not None:
        seen = [Concern.from_dict(c) for c in typed if c.get("text")]
    else:
        seen = [Concern("other", str(w)) for w in conditions.get("warnings", []) if w]
    return [*own, *seen]


def warnings_of(m: Measurement | None, conditions: dict[str, Any]) -> list[str]:
    """The words of :func:`concerns_of`, for a reader that wants only them."""
    return [c.text for c in concerns_of(m, conditions)]


def _finite(x: Any) -> float | None:
    """``x`` as a JSON-safe float (a record is written with ``allow_nan=False``), None where it is none."""
    return round(float(x), 6) if isinstance(x, (int, float)) and math.isfinite(x) else None
