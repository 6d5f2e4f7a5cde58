"""Raw samples in, statistics out.

A :class:`Measurement` keeps every per-sample time so that any statistic can be
derived later (and recomputed when a reader doubts one); nothing here imports
torch, so results can be analysed on a machine without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache, cached_property
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


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """1-based ranks with ties averaged, and the size of each group of ties."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties: list[int] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _exact_u_cdf(u: int, n1: int, n2: int) -> float:
    """P(U <= u) for untied samples under the null, by counting arrangements (Mann and Whitney's recursion)."""

    # count(a, b, k): orderings of a values of one sample and b of the other with U = k (the largest value
    # either belongs to the first sample, adding b to U, or not); small for the sizes it is used for.
    @cache
    def count(a: int, b: int, k: int) -> int:
        if k < 0:
            return 0
        if a == 0 or b == 0:
            return 1 if k == 0 else 0
        return count(a - 1, b, k - b) + count(a, b - 1, k)

    total = math.comb(n1 + n2, n1)
    return sum(count(n1, n2, k) for k in range(u + 1)) / total


#: Up to this many samples on each side, untied, the exact distribution of U is used.
EXACT_U_MAX = 20


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test: could ``a`` and ``b`` come from one distribution?

    A rank test on the raw samples, as asv compares benchmark runs: it assumes no shape for the
    distribution of times (they are skewed, with a long tail), and one outlier moves one rank only.
    Exact for small untied samples, else the normal approximation with the tie correction and a
    continuity correction.
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("the Mann-Whitney test needs samples on both sides")
    ranks, ties = _ranks([*a, *b])
    u1 = math.fsum(ranks[:n1]) - n1 * (n1 + 1) / 2.0
    u = min(u1, n1 * n2 - u1)
    if max(n1, n2) <= EXACT_U_MAX and all(t == 1 for t in ties):
        return min(1.0, 2.0 * _exact_u_cdf(int(u), n1, n2))
    n = n1 + n2
    tie_term = math.fsum(t**3 - t for t in ties) / (n * (n - 1))
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0:  # every value equal: nothing tells the sides apart
        return 1.0
    z = (abs(u1 - n1 * n2 / 2.0) - 0.5) / math.sqrt(var)
    from statistics import NormalDist

    return min(1.0, 2.0 * (1.0 - NormalDist().cdf(max(z, 0.0))))
