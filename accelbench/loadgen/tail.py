"""LoadGen's early-stopping rule for a latency percentile, so that a run can be sized for it beforehand: with
``n`` queries of which ``late`` missed the target, a one-sided binomial test at 99% confidence,
``P(Binomial(n, 1 - percentile) <= late + 1) <= 1 - confidence`` (662 queries pass the 99th percentile only
with none late). The tests check it against LoadGen's own verdicts."""

from __future__ import annotations

import math

#: LoadGen's confidence for early stopping
CONFIDENCE = 0.99


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (n up to millions, k small)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k + 1):
        log_term = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        total += math.exp(log_term)
    return min(total, 1.0)


def passes(n: int, late: int, percentile: float = 0.99) -> bool:
    """Whether LoadGen's early stopping accepts ``n`` queries with ``late`` over the target latency."""
    return n > 0 and _binomial_cdf(late + 1, n, 1 - percentile) <= 1 - CONFIDENCE


def late_allowed(n: int, percentile: float = 0.99) -> int:
    """The most late queries ``n`` queries can have and still pass early stopping (-1: too few queries at all)."""
    if not passes(n, 0, percentile):
        return -1
    lo, hi = 0, max(1, int(n * (1 - percentile)))  # passes(lo); never more late than the percentile allows
    while not passes(n, hi, percentile) and hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(n, mid, percentile):
            lo = mid
        else:
            hi = mid
    return hi if passes(n, hi, percentile) else lo


def min_queries(percentile: float = 0.99) -> int:
    """The fewest queries that pass early stopping, with no late query (662 at the 99th percentile)."""
    n = 1
    while not passes(n, 0, percentile):
        n *= 2
    lo, hi = n // 2, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if passes(mid, 0, percentile) else (mid, hi)
    return hi


def bound_text(n: int, bound_ms: float, percentile: float = 0.99) -> str:
    """Early stopping's bound in words, for a progress line and the record."""
    allowed = late_allowed(n, percentile)
    pct = f"{percentile * 100:g}th percentile"
    if allowed < 0:
        return f"{n} queries are too few for LoadGen's early stopping at the {pct}"
    if allowed == 0:
        return f"LoadGen's early stopping passes the {pct} of {n} queries only if none is over {bound_ms:g} ms"
    return f"LoadGen's early stopping passes the {pct} of {n} queries with at most {allowed} over {bound_ms:g} ms"
