"""Raw samples in, statistics out.

A :class:`Measurement` keeps every per-sample time so that any statistic can be
derived later (and recomputed when a reader doubts one); nothing here imports
torch, so results can be analysed on a machine without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

#: Above this spread (interquartile range over the median) a measurement is flagged as noisy. A robust
#: spread: one outlier among hundreds of samples inflates the CV but not the IQR, and the median the
#: record reports is as robust.
NOISE_SPREAD_THRESHOLD = 0.10
#: Fewer samples than this give no 95% interval: with 5, [min, max] covers the median with only 93.75%.
MIN_CI_SAMPLES = 6
#: Fewer samples than this give no spread either (quartiles of three values say nothing).
MIN_SPREAD_SAMPLES = 4


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default), on already sorted values."""
    if not sorted_values:
        raise ValueError("quantile of no samples")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be within [0, 1], got {q}")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def _binom_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the order statistics bounding the median's CI.

    Distribution-free: the number of samples below the true median is
    Binomial(n, 1/2), so [x_(lo), x_(hi)] covers the median with probability
    >= ``confidence``. Exact for n <= 1000, normal approximation above.
    """
    if n < 1:
        raise ValueError("need at least one sample")
    alpha = 1.0 - confidence
    if n > 1000:
        z = 1.959963984540054 if abs(confidence - 0.95) < 1e-12 else _z(confidence)
        half = z * math.sqrt(n) / 2.0
        lo = max(0, math.floor(n / 2.0 - half) - 1)
        hi = min(n - 1, math.ceil(n / 2.0 + half))
        return lo, hi
    # Largest k with P(X <= k) <= alpha/2; the interval is [x_(k+1), x_(n-k)] (1-based).
    k = -1
    while k + 1 < n and _binom_cdf(k + 1, n) <= alpha / 2.0:
        k += 1
    if k < 0:  # too few samples for the requested confidence: widest interval
        return 0, n - 1
    return k, n - 1 - k


def _z(confidence: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


@dataclass(frozen=True)
class Measurement:
    """Per-sample times (seconds per call) and what was needed to get them."""

    samples: tuple[float, ...]
    calls_per_sample: int = 1
    warmup_calls: int = 0
    total_seconds: float = 0.0
    clock: str = "perf_counter_ns"
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError("a Measurement needs at least one sample")
        if any(not math.isfinite(s) or s < 0 for s in self.samples):
            raise ValueError("samples must be finite and non-negative")

    @cached_property
    def _sorted(self) -> list[float]:
        return sorted(self.samples)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return quantile(self._sorted, 0.5)

    @property
    def mean(self) -> float:
        return math.fsum(self.samples) / self.n

    @property
    def std(self) -> float:
        """Sample standard deviation (n - 1); 0 for a single sample."""
        if self.n < 2:
            return 0.0
        m = self.mean
        return math.sqrt(math.fsum((s - m) ** 2 for s in self.samples) / (self.n - 1))

    @property
    def min(self) -> float:
        return self._sorted[0]

    @property
    def max(self) -> float:
        return self._sorted[-1]

    def percentile(self, p: float) -> float:
        return quantile(self._sorted, p / 100.0)

    @property
    def p90(self) -> float:
        return self.percentile(90)

    @property
    def p99(self) -> float:
        return self.percentile(99)

    @property
    def iqr(self) -> float:
        return self.percentile(75) - self.percentile(25)

    @property
    def cv(self) -> float:
        """Coefficient of variation, std / mean."""
        return self.std / self.mean if self.mean > 0 else 0.0

    @property
    def ci95(self) -> tuple[float, float] | None:
        """95% confidence interval of the median, from order statistics; None below ``MIN_CI_SAMPLES``."""
        if self.n < MIN_CI_SAMPLES:
            return None
        lo, hi = median_ci_ranks(self.n, 0.95)
        return self._sorted[lo], self._sorted[hi]

    @property
    def spread(self) -> float | None:
        """Interquartile range over the median; None below ``MIN_SPREAD_SAMPLES``."""
        if self.n < MIN_SPREAD_SAMPLES or self.median <= 0:
            return None
        return self.iqr / self.median

    @property
    def noisy(self) -> bool:
        return (self.spread or 0.0) > NOISE_SPREAD_THRESHOLD

    def noise_warning(self) -> str | None:
        if self.n < MIN_CI_SAMPLES:
            return f"few samples: {self.n}, too few for a 95% interval (at least {MIN_CI_SAMPLES}); measure longer"
        if not self.noisy:
            return None
        return (
            f"noisy: the middle half of the {self.n} samples spans {self.spread:.0%} of the median "
            f"(> {NOISE_SPREAD_THRESHOLD:.0%})"
        )

    def summary(self) -> dict[str, float]:
        """The derived statistics, as stored beside the metric (no interval where too few samples support one)."""
        lo, hi = self.ci95 or (math.nan, math.nan)
        out = {
            "median": self.median,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "p90": self.p90,
            "p99": self.p99,
            "iqr": self.iqr,
            "cv": self.cv,
            "ci95_low": lo,
            "ci95_high": hi,
        }
        return {k: v for k, v in out.items() if math.isfinite(v)}
