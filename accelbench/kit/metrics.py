"""Constructors for the figures every family derives from a measurement.

One constructor per kind of figure, so that a time, a rate or a share of a peak
carries the same confidence interval and sample count whichever family made it
(the kernels' and training's ``pct_of_peak`` once differed). A rate's interval is
the time interval inverted: the slowest plausible median gives the lowest rate.
"""

from __future__ import annotations

from typing import Any

from accelbench.measure.compiles import compile_warning
from accelbench.measure.stats import Measurement
from accelbench.results.record import Metric


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


def peak_details(value: float, unit: str, source: str, estimated: bool) -> dict[str, Any]:
    """Where a peak came from, stored beside ``pct_of_peak`` so a reader can check it."""
    return {"value": value, "unit": unit, "source": source, "estimated": estimated}


def warnings_of(m: Measurement | None, conditions: dict[str, Any]) -> list[str]:
    """The record's warnings: the measurement's (noise, too few samples, a budget cut short), then what the
    conditions monitor saw."""
    own: list[str | None] = []
    if m is not None:
        own.append(m.noise_warning())
        own.append(compile_warning(m.meta))
        wanted = m.meta.get("min_reps")
        if wanted and m.n < wanted:
            own.append(
                f"min-reps not met: {m.n} of {wanted} samples before --max-time {m.meta.get('max_time', 0):g} s; "
                "raise --max-time"
            )
    return [w for w in [*own, *conditions.get("warnings", [])] if w]
