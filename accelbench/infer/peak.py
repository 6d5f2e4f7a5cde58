"""``--mode find-peak``: the highest Server QPS, or the largest MultiStream query, that LoadGen calls valid.

Server: from a quarter of the probe's throughput, halve until a screen passes
(or, if the start passed, double while they pass: a probe disturbed by load
reads low), then bisect between the highest passing and the lowest failing
target until they are within 2% of each other; a screen passes if its latency
held and its SUT was not busy all the time. Then confirm the result with a fresh run (10% under the
screened peak when its early stopping tolerates no late query; stepping down
10%, then 20%, if a confirmation fails). A confirmation is sized by time as well as
by queries, so a system serving 11 QPS confirms in about a minute, not six, and
its progress line states the early-stopping bound that size leaves; every line
carries the time the search expects to have left. MultiStream: double the
samples per query while the 99th-percentile query latency meets the bound,
then bisect the integer range and confirm. Every trial is a real LoadGen run
with its own log folder; the trials are recorded so a user sees how the peak
was found. Where no confirmation holds VALID there is no peak: the record is
the highest confirmation's, INVALID as LoadGen's own record of it would be
(``ok``, ``valid`` false, the reasons as warnings).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable

from accelbench.errors import BenchmarkFailed
from accelbench.infer import settings as lgset
from accelbench.infer import tail
from accelbench.infer.driver import Outcome, loadgen_run
from accelbench.infer.logs import invalid_reasons
from accelbench.infer.results import ImageDetails, multistream_within_bound, performance_result
from accelbench.infer.serving import Serving
from accelbench.infer.specs import InferParams
from accelbench.kit import metrics as fig
from accelbench.kit.context import RunContext
from accelbench.results.details import FindPeak
from accelbench.results.record import Concern, Result

PRECISION = 0.02
MAX_HALVINGS = 6
#: above a start that held, the search doubles at most this often (4,096x: a probe 20x slow under load is no limit)
MAX_DOUBLINGS = 12
MAX_SAMPLES_PER_QUERY = 4096
CONFIRMATIONS = 3
#: After a confirmation fails, the next tries this much lower, doubling each time (10%, then 20% lower): a short
#: screen near saturation is optimistic (a queue that a long run builds up has no time to form), so a 2% step
#: rarely lands on a rate that holds, and three 10% steps of a slow system's minute-long confirmations ended a
#: 24-minute search with no peak.
CONFIRM_BACKOFF = 0.10
#: Queries in a Server confirmation at most: enough for LoadGen's early stopping to pass a tail near 1% (4,096
#: queries may have 25 late). A slow system gets fewer (see CONFIRM_SECONDS), and a bound that allows fewer late
#: queries, which its progress line and record state.
CONFIRM_QUERIES = 4096
#: A quick-profile Server confirmation lasts about this long at most (beyond its minimum duration): 4,096 queries
#: at 11 QPS (ResNet-50 on a 2-core CPU) were 6 minutes each; at least LoadGen's minimum for the percentile
CONFIRM_SECONDS = 60.0
#: A confirmation whose early stopping allows fewer late queries than this fraction (662 queries: none) starts
#: ``CONFIRM_BACKOFF`` under the screened peak: a screen of 32 queries says nothing of a 1-in-662 slow query
#: (ResNet-50 on a shared 2-core CPU screened clean at 4.9 QPS, then had 240 of 662 confirmation queries late)
TIGHT_TAIL = 0.005
#: seconds LoadGen spends around a trial besides issuing queries (the SUT's start, the last answers, the logs)
TRIAL_OVERHEAD = 1.0
#: a screening trial: about this long, with between these many queries (a p99 clearly over or under the bound)
SCREEN_MS, SCREEN_MIN_QUERIES, SCREEN_MAX_QUERIES = 1000, 32, 200
#: A Server screen whose workers were busy more than this fraction of it is at capacity, whatever its latency: a
#: queue that a long run builds up has no time to form in a few seconds (see BatchingSUT.utilization)
SCREEN_MAX_UTILIZATION = 0.9
#: a slow screen stops at this many seconds of queries, and at no fewer than this many queries: 32 queries at the
#: 1.1 QPS a slow CPU's search starts from were 29 s of a trial whose answer (valid, far below the peak) was clear
SCREEN_MAX_SECONDS, SCREEN_FEWEST = 8.0, 8


def screen_queries(scenario: str, value: float, bound_ms: float) -> int:
    """Queries in about two screening seconds: Server issues ``value`` per second, MultiStream one per bound."""
    per_second = value if scenario == "server" else 1000.0 / bound_ms
    least = max(SCREEN_FEWEST, min(SCREEN_MIN_QUERIES, per_second * SCREEN_MAX_SECONDS))
    return int(min(SCREEN_MAX_QUERIES, max(least, 2 * per_second * SCREEN_MS / 1000)))


def confirmation_size(
    full: tuple[float, int], scenario: str, qps: float = 0.0, official: bool = False
) -> tuple[float, int]:
    """A confirmation run's (minimum ms, minimum queries): the profile's, and for Server sized by time too.

    At a Server peak the tail is close to 1%, and LoadGen's early stopping then needs far more than the 662
    queries that suffice when no query is late (about 4,000 pass a true 0.5% tail). But 4,096 queries at 11
    QPS are six minutes; so a quick confirmation issues ``CONFIRM_SECONDS`` of queries at ``qps`` when that
    is fewer, and never fewer than early stopping's own minimum, and says what bound that leaves
    (:func:`accelbench.infer.tail.bound_text`). The official profile keeps mlperf.conf's count. MultiStream's
    search judges its own bound, query by query.
    """
    if scenario != "server":
        return full
    timed = int(qps * CONFIRM_SECONDS) if qps > 0 and not official else CONFIRM_QUERIES
    return full[0], max(full[1], tail.min_queries(), min(CONFIRM_QUERIES, timed))


def trial_seconds(scenario: str, value: float, queries: int, min_ms: float, bound_ms: float) -> float:
    """How long one trial takes by its plan: its queries at its rate (MultiStream: one per bound), or its minimum."""
    per_query = 1 / max(value, 1e-9) if scenario == "server" else bound_ms / 1000
    return max(min_ms / 1000, queries * per_query) + TRIAL_OVERHEAD


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


def find_peak(
    params: InferParams, serving: Serving, probe: lgset.Probe, record: dict[str, Any], ctx: RunContext
) -> Result:
    reuse = lgset.base(params)  # FromConfig reads mlperf.conf once per process: one settings object for all trials
    trials: list[dict[str, Any]] = []
    bound = lgset.bound_ms(params)

    full = (reuse.min_duration_ms, reuse.min_query_count)
    if probe.single * 1000 > bound:
        raise BenchmarkFailed(
            f"one sample alone takes {probe.single * 1000:.3g} ms, more than the {bound:g} ms bound, so no load "
            "can meet it: raise --latency-bound-ms or serve faster (--backend, --precision)",
            record,
        )

    official = params.profile == "official"
    started = time.monotonic()

    def size(value: float, confirm: bool) -> tuple[float, int]:
        """(minimum ms, minimum queries): screens are short; a confirmation runs under the profile's rules."""
        if confirm:
            return confirmation_size(full, params.scenario, value, official)
        return min(full[0], SCREEN_MS), screen_queries(params.scenario, value, bound)

    def seconds(value: float, confirm: bool) -> float:
        ms, queries = size(value, confirm)
        return trial_seconds(params.scenario, value, queries, ms, bound)

    def expected(value: float) -> float:
        """Where the confirmation will most likely run: Server near the probed capacity, MultiStream at ``value``."""
        return max(value, probe.rate * 0.9) if params.scenario == "server" else value

    def trial(value: float, confirm: bool = False, after: int = 0) -> tuple[bool, Outcome]:
        """One LoadGen run at ``value``; ``after``: the screens the search expects after this one (for the ETA)."""
        if params.scenario == "server":
            s = lgset.performance_settings(params, probe, target_qps=value, reuse=reuse)
        else:
            s = lgset.performance_settings(params, probe, samples_per_query=int(value), reuse=reuse)
        s.min_duration_ms, s.min_query_count = size(value, confirm)
        done = f"{time.monotonic() - started:.0f} s so far"
        if confirm:
            n = sum(t["confirmation"] for t in trials) + 1
            stopping = tail.bound_text(s.min_query_count, bound) if params.scenario == "server" else ""
            ctx.progress(
                f"find-peak confirmation {n} of at most {CONFIRMATIONS}: {_label(params, value)}, "
                f"{s.min_query_count:,} queries ({done}){'; ' + stopping if stopping else ''}",
                left=seconds(value, True),
            )
        else:
            ctx.progress(
                f"find-peak trial {len(trials) + 1}: {_label(params, value)} ({done})",
                # then, most likely, one confirmation near the capacity the probe measured
                left=seconds(value, False) * (1 + after) + seconds(expected(value), True),
            )
        outcome = loadgen_run(serving, s, params, ctx)
        busy = getattr(outcome.sut, "utilization", None)
        if confirm:
            ok = outcome.detail.get("result_validity") == "VALID"
        else:  # too few queries for early stopping by design: judge the screen by its latency and load
            ok = screen_passed(outcome.detail, busy if params.scenario == "server" else None)
        d = outcome.detail
        why = invalid_reasons(d, params.scenario) if confirm and not ok else []
        if params.scenario == "multistream" and not multistream_within_bound(d, bound):
            ok = False  # accelbench's own bound: LoadGen >= 2.0 has none for MultiStream
            ns = d.get("result_99.00_percentile_per_query_latency_ns") or d.get("result_99.00_percentile_latency_ns", 0)
            over = f"the 99th-percentile query latency {ns / 1e6:.3g} ms is over the {bound:g} ms bound"
            why = [r for r in why if not r.startswith("LoadGen reported INVALID")] + [over] if confirm else []
        trials.append(
            {
                "value": value,
                "valid": ok,
                "confirmation": confirm,
                "queries": d.get("result_query_count"),
                "late_queries": d.get("result_overlatency_query_count"),
                "p99_latency_seconds": d.get("result_99.00_percentile_latency_ns", 0) / 1e9,
                "completed_per_second": d.get("result_completed_samples_per_sec"),
                "utilization": busy,
                "log_dir": str(outcome.outdir),
            }
            | ({"early_stopping": stopping} if confirm and stopping else {})
            | ({"invalid_reasons": why} if why else {})
        )
        return ok, outcome

    def margin(value: float) -> float:
        """How far under the screened peak the first confirmation runs (see ``TIGHT_TAIL``)."""
        n = size(value, True)[1]
        return CONFIRM_BACKOFF if tail.late_allowed(n) < TIGHT_TAIL * n else 0.0

    try:
        if params.scenario == "server":
            start = params.target_qps or probe.rate * lgset.SERVER_FRACTION
            peak, outcome, held = _search_server(trial, start, probe.rate, margin)
        else:
            peak, outcome, held = _search_multistream(trial)
    except BenchmarkFailed as exc:  # no load at all met the bound: no run a record could keep
        raise BenchmarkFailed(str(exc), record, {"find_peak": {"trials": trials, "latency_bound_ms": bound}}) from None
    search: FindPeak = {
        "precision": PRECISION,
        "trials": trials,
        "latency_bound_ms": bound,
        "search_seconds": round(time.monotonic() - started, 1),
    }
    if params.scenario == "multistream":
        params = dataclasses.replace(params, samples_per_query=int(peak))
        record = record | {"samples_per_query": int(peak)}
    if not held:
        return _no_peak(params, record, outcome, probe, search, [t for t in trials if t["confirmation"]])
    # the target that held; the headline is LoadGen's own metric of that run (its scheduled rate for Server)
    result = performance_result(params, record, outcome, probe, ImageDetails(find_peak=search | {"peak": peak}))
    if params.scenario == "multistream":
        result.metrics["peak_samples_per_query"] = fig.figure(peak, "samples/query", higher_is_better=True)
        result.primary_metric = "peak_samples_per_query"
    return result


def _no_peak(
    params: InferParams,
    record: dict[str, Any],
    outcome: Outcome,
    probe: lgset.Probe,
    search: FindPeak,
    tried: list[dict[str, Any]],
) -> Result:
    """No confirmation held VALID: a peak LoadGen did not accept is no peak. The record is the highest
    confirmation's, as LoadGen's own INVALID record of that run would be (ok, ``valid`` false, its figures, the
    reasons as ``INVALID: ...`` warnings; exit status 3); ``details.find_peak.peak`` is None."""
    result = performance_result(params, record, outcome, probe, ImageDetails(find_peak=search | {"peak": None}))
    why = list(dict.fromkeys(r for t in tried for r in t.get("invalid_reasons", []))) or ["latency bound"]
    summary = (
        f"no peak: {len(tried)} confirmation runs at {', '.join(_label(params, t['value']) for t in tried)} were all "
        f"INVALID; the figures are the first's, at {_label(params, tried[0]['value'])}, and the screening trials are "
        "in details.find_peak"
    )
    result.valid = False  # a MultiStream run LoadGen calls VALID can still be over accelbench's bound
    result.details["invalid_reasons"] = [summary, *why]
    invalid = [Concern("invalid", f"INVALID: {r}") for r in (summary, *why)]
    result.set_concerns([*invalid, *(c for c in result.concerns if c.kind != "invalid")])
    return result


def _label(params: InferParams, value: float) -> str:
    return f"{value:,.1f} QPS" if params.scenario == "server" else f"{int(value)} samples/query"


def _search_server(
    trial: Callable[..., tuple[bool, Any]], start: float, capacity: float, margin: Callable[[float], float]
) -> tuple[float, Any, bool]:
    """(the confirmed peak, its run, True), or where no confirmation held (the highest confirmed, its run, False)."""
    lo, hi = 0.0, max(capacity * 1.1, start * 1.05)
    q = min(start, hi / 1.05)
    for _ in range(MAX_HALVINGS):
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
        lo = _backed_off(lo, outcome.detail, CONFIRM_BACKOFF * 2**k)
    assert first is not None
    return *first, False  # none held: the caller reports the highest confirmation, INVALID


def _backed_off(value: float, d: dict[str, Any], step: float) -> float:
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


def _search_multistream(trial: Callable[..., tuple[bool, Any]]) -> tuple[float, Any, bool]:
    if not trial(1)[0]:
        raise BenchmarkFailed("a MultiStream query of one sample already misses the bound: raise --latency-bound-ms")
    lo, hi = 1, None
    while hi is None:
        n = lo * 2
        if n > MAX_SAMPLES_PER_QUERY:
            break
        if trial(n)[0]:
            lo = n
        else:
            hi = n
    while hi is not None and hi - lo > max(1, int(lo * PRECISION)):
        mid = (lo + hi) // 2
        if trial(mid, after=screens_left(lo, hi) - 1)[0]:
            lo = mid
        else:
            hi = mid
    first: tuple[float, Any] | None = None
    for k in range(CONFIRMATIONS):
        ok, outcome = trial(lo, confirm=True)
        if ok:
            return float(lo), outcome, True
        first = first or (float(lo), outcome)
        lo = max(1, min(lo - 1, int(lo * (1 - CONFIRM_BACKOFF * 2**k))))
    assert first is not None
    return *first, False
