"""``--mode find-peak``: the highest Server QPS, or the largest MultiStream query, that LoadGen calls valid.

Server: from the probe's throughput, halve until a run is VALID, then bisect
between the highest valid and the lowest invalid target until they are within
2% of each other, then confirm the result with a fresh run (stepping down 2% if
the confirmation fails). MultiStream: double the samples per query while the
99th-percentile query latency meets the bound, then bisect the integer range
and confirm. Every trial is a real LoadGen run with its own log folder; the
trials are recorded so a user sees how the peak was found.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from accelbench.infer import settings as lgset
from accelbench.infer.driver import Outcome, Serving, loadgen_run
from accelbench.infer.logs import invalid_reasons
from accelbench.infer.results import NAME, multistream_within_bound, performance_result
from accelbench.infer.specs import InferParams
from accelbench.kit import metrics as fig
from accelbench.kit.context import RunContext
from accelbench.results.record import Result

PRECISION = 0.02
MAX_HALVINGS = 6
MAX_SAMPLES_PER_QUERY = 4096
CONFIRMATIONS = 3
#: After a confirmation fails, the next tries this much lower: a short screen near saturation is optimistic
#: (a queue that a long run builds up has no time to form), so a 2% step rarely lands on a rate that holds.
CONFIRM_BACKOFF = 0.10
#: Queries in a confirmation run at least: enough for LoadGen's early stopping to pass a tail near 1%.
CONFIRM_QUERIES = 4096
#: a screening trial: about this long, with between these many queries (a p99 clearly over or under the bound)
SCREEN_MS, SCREEN_MIN_QUERIES, SCREEN_MAX_QUERIES = 1000, 32, 200


def screen_queries(scenario: str, value: float, bound_ms: float) -> int:
    """Queries in about two screening seconds: Server issues ``value`` per second, MultiStream one per bound."""
    per_second = value if scenario == "server" else 1000.0 / bound_ms
    return int(min(SCREEN_MAX_QUERIES, max(SCREEN_MIN_QUERIES, 2 * per_second * SCREEN_MS / 1000)))


def confirmation_size(full: tuple[float, int], scenario: str) -> tuple[float, int]:
    """A confirmation run's (minimum ms, minimum queries): the profile's, and for Server ``CONFIRM_QUERIES``.

    At a Server peak the tail is close to 1%, and LoadGen's early stopping then needs far more than the 662
    queries that suffice when no query is late (about 4,000 pass a true 0.5% tail): too few, and every
    confirmation fails however good the rate. MultiStream's search judges its own bound, query by query.
    """
    return full[0], max(full[1], CONFIRM_QUERIES) if scenario == "server" else full[1]


def screen_passed(d: dict[str, Any]) -> bool:
    """A screening trial passes if LoadGen's latency constraint held and the SUT kept up with the schedule."""
    return d.get("result_perf_constraints_met", True) is not False and not d.get("_errors")


def find_peak(
    params: InferParams, serving: Serving, probe: lgset.Probe, record: dict[str, Any], ctx: RunContext
) -> Result:
    reuse = lgset.base(params)  # FromConfig reads mlperf.conf once per process: one settings object for all trials
    trials: list[dict[str, Any]] = []
    bound = lgset.bound_ms(params)

    full = (reuse.min_duration_ms, reuse.min_query_count)
    if probe.single * 1000 > bound:
        raise RuntimeError(
            f"one sample alone takes {probe.single * 1000:.3g} ms, more than the {bound:g} ms bound, so no load "
            "can meet it: raise --latency-bound-ms or serve faster (--backend, --precision)"
        )

    def trial(value: float, confirm: bool = False) -> tuple[bool, Outcome]:
        if params.scenario == "server":
            s = lgset.performance_settings(params, probe, target_qps=value, reuse=reuse)
        else:
            s = lgset.performance_settings(params, probe, samples_per_query=int(value), reuse=reuse)
        # screening trials are short; only the confirmation runs under the profile's full rules
        screen = (min(full[0], SCREEN_MS), screen_queries(params.scenario, value, bound))
        s.min_duration_ms, s.min_query_count = confirmation_size(full, params.scenario) if confirm else screen
        kind = "confirmation" if confirm else f"trial {len(trials) + 1}"
        ctx.progress(f"find-peak {kind}: {_label(params, value)}")
        outcome = loadgen_run(serving, s, params, ctx)
        if confirm:
            ok = outcome.detail.get("result_validity") == "VALID"
        else:  # too few queries for early stopping by design: judge the screen by its latency alone
            ok = screen_passed(outcome.detail)
        if params.scenario == "multistream":
            ok = ok and multistream_within_bound(outcome.detail, bound)
        p99 = outcome.detail.get("result_99.00_percentile_latency_ns", 0) / 1e9
        trials.append(
            {
                "value": value,
                "valid": ok,
                "confirmation": confirm,
                "p99_latency_seconds": p99,
                "log_dir": str(outcome.outdir),
            }
            | ({"invalid_reasons": invalid_reasons(outcome.detail, params.scenario)} if confirm and not ok else {})
        )
        return ok, outcome

    if params.scenario == "server":
        peak, outcome = _search_server(trial, params.target_qps or probe.rate * lgset.SERVER_FRACTION, probe.rate)
    else:
        peak, outcome = _search_multistream(trial)
    search = {"precision": PRECISION, "trials": trials, "latency_bound_ms": bound}
    if outcome is None:  # no confirmation run held VALID: a peak LoadGen did not accept is no peak
        tried = [t for t in trials if t["confirmation"]]
        why = "; ".join(dict.fromkeys(r for t in tried for r in t.get("invalid_reasons", []))) or "latency bound"
        return Result(
            NAME,
            record,
            status="failed",
            error=(
                f"no peak: {len(tried)} confirmation runs at {', '.join(_label(params, t['value']) for t in tried)} "
                f"were all INVALID ({why}); the screening trials are in details.find_peak"
            ),
            details={"find_peak": search},
        )
    # the target that held; the headline is LoadGen's own metric of that run (its scheduled rate for Server)
    extra = {"find_peak": search | {"peak": peak}}
    if params.scenario == "multistream":
        params = dataclasses.replace(params, samples_per_query=int(peak))
        record = record | {"samples_per_query": int(peak)}
    result = performance_result(params, record, outcome, probe, extra)
    if params.scenario == "multistream":
        result.metrics["peak_samples_per_query"] = fig.figure(peak, "samples/query", higher_is_better=True)
        result.primary_metric = "peak_samples_per_query"
    return result


def _label(params: InferParams, value: float) -> str:
    return f"{value:,.1f} QPS" if params.scenario == "server" else f"{int(value)} samples/query"


def _search_server(trial: Callable[..., tuple[bool, Any]], start: float, capacity: float) -> tuple[float, Any]:
    lo, hi = 0.0, max(capacity * 1.1, start * 1.05)
    q = min(start, hi / 1.05)
    for _ in range(MAX_HALVINGS):
        if trial(q)[0]:
            lo = q
            break
        hi, q = q, q / 2
    if lo == 0.0:
        raise RuntimeError(f"no valid Server rate found down to {q:.3g} QPS: raise --latency-bound-ms")
    if lo == start:  # the start was valid: is the upper limit too?
        ok, _ = trial(hi)
        if ok:
            lo = hi
    while hi > lo and (hi - lo) / lo > PRECISION:
        mid = (lo + hi) / 2
        if trial(mid)[0]:
            lo = mid
        else:
            hi = mid
    for _ in range(CONFIRMATIONS):  # a fresh run at the peak: noise may have favoured one trial
        ok, outcome = trial(lo, confirm=True)
        if ok:
            return lo, outcome
        lo *= 1 - CONFIRM_BACKOFF
    return lo, None  # none held: the caller reports it as failed


def _search_multistream(trial: Callable[..., tuple[bool, Any]]) -> tuple[float, Any]:
    if not trial(1)[0]:
        raise RuntimeError("a MultiStream query of one sample already misses the bound: raise --latency-bound-ms")
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
        if trial(mid)[0]:
            lo = mid
        else:
            hi = mid
    for _ in range(CONFIRMATIONS):
        ok, outcome = trial(lo, confirm=True)
        if ok:
            return float(lo), outcome
        lo = max(1, lo - max(1, int(lo * PRECISION)))
    return float(lo), None
