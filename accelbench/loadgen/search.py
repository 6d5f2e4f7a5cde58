"""The highest Server rate LoadGen calls valid: halve from a start until a screen passes (or double while they
pass: a probe disturbed by load reads low), bisect to ``PRECISION``, then confirm with fresh runs, stepping down
while a confirmation is INVALID. The caller owns what a trial is (its size, its screen, its record)."""

from __future__ import annotations

import math
from typing import Any, Callable

from accelbench.errors import BenchmarkFailed

PRECISION = 0.02
MAX_HALVINGS = 6
#: above a start that held, the search doubles at most this often (4,096x: a probe 20x slow under load is no limit)
MAX_DOUBLINGS = 12
CONFIRMATIONS = 3
#: After a confirmation fails, the next tries this much lower, doubling each time (10%, then 20% lower): a short
#: screen near saturation is optimistic, so a 2% step rarely lands on a rate that holds
CONFIRM_BACKOFF = 0.10
#: seconds LoadGen spends around a trial besides issuing queries (the SUT's start, the last answers, the logs)
TRIAL_OVERHEAD = 1.0
#: A Server screen whose workers were busy more than this fraction of it is at capacity, whatever its latency: a
#: queue that a long run builds up has no time to form in a few seconds (a SUT's ``utilization``)
SCREEN_MAX_UTILIZATION = 0.9


def screens_left(lo: float, hi: float) -> int:
    """Bisection steps left until ``lo`` and ``hi`` are within ``PRECISION`` (one more if no valid ``lo`` yet)."""
    if lo <= 0:
        return 1 + math.ceil(math.log2(1 / PRECISION))
    return max(0, math.ceil(math.log2(max((hi - lo) / (lo * PRECISION), 1.0))))


def screen_passed(d: dict[str, Any], utilization: float | None = None) -> bool:
    """A screening trial passes if LoadGen's latency constraint held and the SUT kept up with the schedule,
    with time to spare (busy at most ``SCREEN_MAX_UTILIZATION`` of the run, where the SUT measured it)."""
    if utilization is not None and utilization > SCREEN_MAX_UTILIZATION:
        return False
    return d.get("result_perf_constraints_met", True) is not False and not d.get("_errors")


def search_server(
    trial: Callable[..., tuple[bool, Any]],
    start: float,
    capacity: float,
    margin: Callable[[float], float],
    halvings: int = MAX_HALVINGS,
) -> tuple[float, Any, bool]:
    """(the confirmed peak, its run, True), or where no confirmation held (the highest confirmed, its run, False).
    ``halvings``: screens tried, each at half the rate of the last, before no rate is said to hold."""
    lo, hi = 0.0, max(capacity * 1.1, start * 1.05)
    q = min(start, hi / 1.05)
    for _ in range(halvings):
        if trial(q, after=screens_left(q, hi))[0]:
            lo = q
            break
        hi, q = q, q / 2
    if lo == 0.0:
        raise BenchmarkFailed(f"no valid Server rate found down to {q:.3g} QPS: raise --latency-bound-ms")
    if lo == start:  # the start was valid: is the upper limit too? Then double (a probe disturbed by load reads low)
        for _ in range(MAX_DOUBLINGS):
            if not trial(hi, after=screens_left(lo, hi) - 1)[0]:
                break
            lo, hi = hi, hi * 2
    while hi > lo and (hi - lo) / lo > PRECISION:
        mid = (lo + hi) / 2
        if trial(mid, after=screens_left(lo, hi) - 1)[0]:
            lo = mid
        else:
            hi = mid
    lo *= 1 - margin(lo)
    first: tuple[float, Any] | None = None
    for k in range(CONFIRMATIONS):  # a fresh run at the peak: noise may have favoured one trial
        ok, outcome = trial(lo, confirm=True)
        if ok:
            return lo, outcome, True
        first = first or (lo, outcome)
        lo = backed_off(lo, outcome.detail, CONFIRM_BACKOFF * 2**k)
    assert first is not None
    return *first, False  # none held: the caller reports the highest confirmation, INVALID


def backed_off(value: float, d: dict[str, Any], step: float) -> float:
    """The next confirmation's rate: ``step`` lower, or by the fraction of its queries that were late if that is
    more (240 of 662 late is a queue that grew for minutes, not a tail 10% fixes), and lower still if the system
    could not keep up at all (it completed fewer queries per second than were scheduled: its capacity)."""
    completed = float(d.get("result_completed_samples_per_sec") or 0.0)
    scheduled = float(d.get("result_scheduled_samples_per_sec") or 0.0)
    late = (d.get("result_overlatency_query_count") or 0) / max(d.get("result_query_count") or 0, 1)
    lower = value * (1 - min(max(step, late), 0.5))
    if completed and scheduled and completed < 0.95 * scheduled:
        lower = min(lower, completed * (1 - step))
    return lower
